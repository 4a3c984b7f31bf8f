#!/usr/bin/env bash
# Session 15 round EH: the single-token GEMM2's slot sum in a cluster along y (DecodeParams::ysum):
# MoE tests with it on and off, bench moe M = 1 on vs off (LOWBIT_INT4_MOE_YSUM=0), twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe.log 2>&1; echo "moe tests rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_moe.log; grep -m3 -A8 "Failure" $R/gpu_moe.log | head -30
LOWBIT_INT4_MOE_YSUM=0 timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe_ysum_off.log 2>&1; echo "moe tests ysum off rc=$?"; tail -1 $R/gpu_moe_ysum_off.log
for rep in 1 2; do
for env in "X=1" "LOWBIT_INT4_MOE_YSUM=0"; do
  tag=$(echo "$env" | tr ' =' '__')_$rep
  env $env timeout 60 $B/lowbit bench moe --m 1 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b --path fused --reps 10 --out $R/moe_$tag > $R/bench_$tag.log 2>&1; echo "== $env rc=$?"
  grep -E "^ +(qwen|mixtral|deepseek)" $R/bench_$tag.log | awk '{print $1, $4, $6, $9, $12}'
done
done
tar -C $R -czf $OUT/results.tgz .
