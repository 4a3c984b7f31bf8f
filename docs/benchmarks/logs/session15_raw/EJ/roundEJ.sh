#!/usr/bin/env bash
# Session 15 round EJ (final code, 9565df2): scripts/device/int4.sh end to end, model tests.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
STEP_TAIL=2 BIN=$B OUT=$R timeout 360 bash scripts/device/int4.sh > $R/int4_round.log 2>&1; echo "int4.sh rc=$? $(( $(date +%s)-t0 ))s"
sed -n '/=== int4 summary ===/,/^---/p' $R/int4_round.log | head -30
grep -h "total #wrong" $R/bench_*.log | sort | uniq -c
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -1 $R/gpu_model.log
tar -C $R -czf $OUT/results.tgz .
