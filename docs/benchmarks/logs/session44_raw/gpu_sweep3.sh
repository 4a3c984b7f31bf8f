#!/usr/bin/env bash
# Session 44 (measurements only, for the next plan change): with the final kernels (30eaecf), the
# PDL trigger point of the dense decode kernel (LOWBIT_INT4_DECODE_TRIGGER 0 / 1 / 2 against the
# plan's rule) on 8b.qkv (now 8-warp blocks alone at M <= 8) and 8b.o, and 8b.o in 4-warp pairs,
# bf16, M = 1 / 8, three alternated passes.
# run(command="ONLY=H200 bash docs/benchmarks/logs/session44_raw/gpu_sweep3.sh", carry=[".dev/s44f"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s44f; S=$OUT/s3; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S/gpu.txt 2>&1; cat $S/gpu.txt
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $S/gpu.txt; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
b() { local name=$1 shapes=$2; shift 2; env "$@" timeout 30 $B/lowbit bench gemm --shapes $shapes --m 1,8 --path skinny --reps 5 --cooldown-ms 100 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
t0=$(date +%s)
for pass in 1 2 3; do
  b def_$pass llama3-8b.qkv,llama3-8b.o
  for t in 0 1 2; do b trig${t}_$pass llama3-8b.qkv,llama3-8b.o LOWBIT_INT4_DECODE_TRIGGER=$t; done
  b o_w4s2_$pass llama3-8b.o LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2
  b o_w4s2trig1_$pass llama3-8b.o LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2 LOWBIT_INT4_DECODE_TRIGGER=1
done
echo "done in $(( $(date +%s) - t0 )) s"; grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf sweep3.tgz s3
