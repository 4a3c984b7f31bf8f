#!/usr/bin/env bash
# Session 45's second call (measurements only; binaries of the first call, .dev/s45a): where 4-warp
# pairs stop beating the plan's 8-warp pairs. The first call found them faster on 8b.o (64 column
# groups, 2 batches of 8 K steps per warp in 8-warp pairs) at M = 1..4 in bf16 and slower on 8b.down
# (64 groups, 7 batches) and 70b.o (128 groups, 4 batches). Here the Llama-3-70B tensor-parallel
# shares with few groups or short K: tp2/tp4/tp8.o (128 groups, 2 / 1 / 0.5 batches), tp8.down
# (128 groups, 1.75), tp4/tp8.qkv (40 / 20 groups, 4 batches), bf16 and fp16, M = 1, 2, 4, 8, three alternated passes.
# run(command="ONLY=H200 bash docs/benchmarks/logs/session45_raw/gpu_bound.sh", carry=[".dev/s45a"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45a; S=$OUT/b; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $S/gpu.csv; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
SH=llama3-70b.tp2.o,llama3-70b.tp4.o,llama3-70b.tp8.o,llama3-70b.tp8.down,llama3-70b.tp4.qkv,llama3-70b.tp8.qkv
b() { local name=$1 dt=$2; shift 2; env "$@" timeout 40 $B/lowbit bench gemm --shapes $SH --dtype $dt --m 1,2,4,8 --path skinny --reps 5 --cooldown-ms 100 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do for dt in bf16 fp16; do
  b def_${dt}_$pass $dt
  b o_w4s2_${dt}_$pass $dt LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2
done; done
echo "done in $(( $(date +%s) - t0 )) s"; grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf bound.tgz b
