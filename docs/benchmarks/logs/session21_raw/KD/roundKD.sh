#!/usr/bin/env bash
# Session 21 round KD: the GPU int4 suite with the new lean cases (split-K pairs on 96 groups
# with tail batches, the push test on them), default plan and lean forced.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean2_w8.log 2>&1; echo "== lean2_w8 rc=$?"; tail -n 1 $R/tests_lean2_w8.log
LOWBIT_INT4_DECODE_LEAN=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean0.log 2>&1; echo "== lean0 rc=$?"; tail -n 1 $R/tests_lean0.log
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $T --gtest_brief=1 --gtest_filter='*DecodePush*' > $R/racecheck_push.log 2>&1; echo "== racecheck rc=$?"; tail -n 2 $R/racecheck_push.log
tar -C $R -czf $OUT/results.tgz .
