#!/usr/bin/env bash
# Session 45's third call, binaries of the candidate rule (bf16 M <= 4: 4-warp pairs where 8-warp
# pairs give each warp <= 2 batches and 4-warp pair blocks fit one per SM; decode_plan.h): the whole
# GPU int4 suite; the rule's choice ("def") against the same binary forced to 8-warp pairs (the
# previous plan) and to 4-warp pairs on 8b.o and weights of other N x K (bench gemm --shapes NxK)
# inside the rule (2048x4096, 3072x4096, 4096x2048, 4096x3072) and past its K bound (4096x6144,
# 2048x8192), bf16, M = 1 / 2 / 4 / 8, and 8b.o with G = 64 and per-channel, three alternated
# passes; on an H200 then the dense table (bench gemm, every shape and M).
# run(command="ONLY=H200 SUITE_ANYWAY=1 bash docs/benchmarks/logs/session45_raw/gpu_cand.sh", carry=[".dev/s45b"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45b; R=$OUT/c; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv && [ -z "${SUITE_ANYWAY:-}" ]; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
if [ -z "${NO_SUITE:-}" ]; then echo "== T whole GPU int4 suite"; timeout 200 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/gpu_int4.log | head -8; el; fi
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv; then echo "not an $ONLY: benches skipped"; cd $OUT && tar czf cand.tgz c; exit 0; fi
SH=llama3-8b.o,2048x4096,3072x4096,4096x2048,4096x3072,4096x6144,2048x8192
b() { local name=$1 shapes=$2 extra=$3; shift 3; env "$@" timeout 40 $B/lowbit bench gemm --shapes $shapes $extra --m 1,2,4,8 --path skinny --reps 5 --cooldown-ms 100 --out $R/$name > $R/$name.log 2>&1 || echo "$name rc $?"; }
echo "== S rule vs 8-warp / 4-warp pairs"
for pass in 1 2 3; do
  b def_$pass $SH ""
  b w8s2_$pass $SH "" LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2
  b w4s2_$pass $SH "" LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2
  for g in 64 -1; do
    b g${g}def_$pass llama3-8b.o "--group $g"
    b g${g}w8s2_$pass llama3-8b.o "--group $g" LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2
    b g${g}w4s2_$pass llama3-8b.o "--group $g" LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2
  done
done; el
if [ -z "${NO_TABLE:-}" ]; then echo "== G bench gemm (all)"; timeout 150 $B/lowbit bench gemm --cooldown-ms 300 --out $R/gemm > $R/gemm.log 2>&1; echo "rc $?"; el; fi
grep -h "total #wrong" $R/*.log | sort | uniq -c
cd $OUT && tar czf cand.tgz c
