#!/usr/bin/env bash
# Session 24 round NG (test binaries of 22090a0, the final code): model suite, the MoE cases with
# the single-token path off, racecheck and memcheck on the single-token cases.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
T=$B/lowbit_tests_gpu_int4
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$?"; tail -n 1 $R/tests_model.log
timeout 100 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe.log 2>&1; echo "== moe rc=$?"; tail -n 1 $R/tests_moe.log
LOWBIT_INT4_MOE_SINGLE=0 timeout 100 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_single0.log 2>&1; echo "== moe single off rc=$?"; tail -n 1 $R/tests_moe_single0.log
for tool in memcheck racecheck; do
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool $T --gtest_brief=1 --gtest_filter='Cases/Int4MoeSingleToken.*/0:Cases/Int4MoeSingleToken.*/3:Cases/Int4MoeSingleToken.*/7' > $R/san_$tool.log 2>&1; echo "== $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $R/san_$tool.log | tail -3
done
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_*.log | head -20
tar -C $R -czf $OUT/results.tgz .
