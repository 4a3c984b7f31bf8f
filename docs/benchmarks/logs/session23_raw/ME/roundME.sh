#!/usr/bin/env bash
# Session 23 round ME (test binaries of the review mend): GPU int4 tests default, the x copy
# off / forced, model suite.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
T=$B/lowbit_tests_gpu_int4
F='Forced/Int4Gemm*:*DecodePush*:*XSteps*'
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
LOWBIT_INT4_DECODE_XSTEPS=0 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs0.log 2>&1; echo "== xs0 rc=$?"; tail -n 1 $R/tests_xs0.log
LOWBIT_INT4_DECODE_XSTEPS=2 LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs2_lean.log 2>&1; echo "== xs2_lean rc=$?"; tail -n 1 $R/tests_xs2_lean.log
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$?"; tail -n 1 $R/tests_model.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_*.log | head -30
tar -C $R -czf $OUT/results.tgz .
