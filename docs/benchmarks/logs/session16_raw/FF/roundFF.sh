#!/usr/bin/env bash
# Session 16 round FF (final test binary): the int4 GPU tests, and int4.sh's push-off step
# (the dense and MoE cases with LOWBIT_INT4_DECODE_PUSH=0), which ran past its 60 s in round FE.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
LOWBIT_INT4_DECODE_PUSH=0 timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*/Int4Gemm.*:*Moe*' > $R/gpu_int4_push_off.log 2>&1; echo "push off rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4_push_off.log
tar -C $R -czf $OUT/results.tgz .
