#!/usr/bin/env bash
# Session 15 round EI (final code): int4 + model tests, MoE tests with the cluster slot sum
# forced up to topk 8 and off, bench moe (default M list, all four models) -> docs/benchmarks/moe.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 200 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_model.log
for v in 2 0; do LOWBIT_INT4_MOE_YSUM=$v timeout 60 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe_ysum$v.log 2>&1; echo "moe ysum=$v rc=$?"; tail -1 $R/gpu_moe_ysum$v.log; done
timeout 150 $B/lowbit bench moe --out $R/moe > $R/bench_moe.log 2>&1; echo "bench moe rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^ +(qwen|mixtral|deepseek)" $R/bench_moe.log | awk '$4<=16 {print $1, $4, $6, $9, $12}'; grep "total #wrong" $R/bench_moe.log
tar -C $R -czf $OUT/results.tgz .
