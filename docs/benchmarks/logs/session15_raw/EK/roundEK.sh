#!/usr/bin/env bash
# Session 15 round EK (final code: the cluster-sum probe cached per device): int4 + model tests,
# the MoE cases with the cluster sum forced and off, bench moe M = 1.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_int4.log
timeout 40 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -1 $R/gpu_model.log
for v in 2 0; do LOWBIT_INT4_MOE_YSUM=$v timeout 40 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe_ysum$v.log 2>&1; echo "moe ysum=$v rc=$?"; tail -1 $R/gpu_moe_ysum$v.log; done
timeout 40 $B/lowbit bench moe --m 1 --path fused --out $R/moe_m1 > $R/bench_m1.log 2>&1; echo "bench rc=$?"; grep -E "^ +(qwen|mixtral|deepseek)" $R/bench_m1.log | awk '{print $1, $4, $6, $9, $12}'
tar -C $R -czf $OUT/results.tgz .
