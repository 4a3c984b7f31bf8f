#!/usr/bin/env bash
# Session 15 round EG (final code: the one-launch layer reverted, trace probes off by default,
# 3 more single-token test cases): int4 + model tests, the MoE decode cases under the switches,
# and bench moe M = 1 / 8 / 16 on the small-expert models (against round DD's tables).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 200 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_model.log
LOWBIT_INT4_MOE_SINGLE=0 timeout 60 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe_single_off.log 2>&1; echo "moe single-off rc=$?"; tail -1 $R/gpu_moe_single_off.log
timeout 100 $B/lowbit bench moe --m 1,8,16 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --path fused --reps 10 --out $R/moe_check > $R/bench_check.log 2>&1; echo "bench rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^ +(qwen|mixtral|deepseek)|wrong" $R/bench_check.log | awk '{print $1, $4, $6, $9, $12}'
tar -C $R -czf $OUT/results.tgz .
