#!/usr/bin/env bash
# Session 21 round KF: the review mend (lean dispatch in launch_t): GPU int4 suite, lean forced,
# and 4 warps forced on lean plans.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean2_w8.log 2>&1; echo "== lean2_w8 rc=$?"; tail -n 1 $R/tests_lean2_w8.log
LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_w4.log 2>&1; echo "== w4 rc=$?"; tail -n 1 $R/tests_w4.log
tar -C $R -czf $OUT/results.tgz .
