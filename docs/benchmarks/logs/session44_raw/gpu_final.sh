#!/usr/bin/env bash
# Session 44's last call, binaries of the bf16 8b.qkv plan rule: the whole GPU int4 suite; 8b.qkv
# under the plan against the same binary forced back to 8-warp pairs (LOWBIT_INT4_DECODE_WARPS=8
# _SPLITS=2 on that shape alone), bf16 and fp16, M = 1 / 8 / 16, three alternated passes; on an
# H200 also the dense table (bench gemm, every shape and M).
# run(command="bash docs/benchmarks/logs/session44_raw/gpu_final.sh", carry=[".dev/s44e"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s44e; R=$OUT/f; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt 2>&1; cat $R/gpu.txt
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T whole GPU int4 suite"; timeout 200 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)" $R/gpu_int4.log | head -8; el
echo "== Q 8b.qkv plan vs pairs"
for pass in 1 2 3; do for dt in bf16 fp16; do
  timeout 30 $B/lowbit bench gemm --shapes llama3-8b.qkv --dtype $dt --m 1,8,16 --path skinny --reps 5 --cooldown-ms 100 --out $R/plan_${dt}_$pass > $R/plan_${dt}_$pass.log 2>&1 || echo "plan $dt rc $?"
  LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2 timeout 30 $B/lowbit bench gemm --shapes llama3-8b.qkv --dtype $dt --m 1,8,16 --path skinny --reps 5 --cooldown-ms 100 --out $R/pairs_${dt}_$pass > $R/pairs_${dt}_$pass.log 2>&1 || echo "pairs $dt rc $?"
done; done; el
if grep -q H200 $R/gpu.txt; then
  echo "== G bench gemm (all)"; timeout 120 $B/lowbit bench gemm --cooldown-ms 300 --out $R/gemm > $R/gemm.log 2>&1; echo "rc $?"; el
fi
grep -h "total #wrong" $R/*.log | sort | uniq -c
cd $OUT && tar czf final.tgz f
