#!/usr/bin/env bash
# Session 26 round QD: lowbit_tests_gpu_model at 25603d2 (the wgmma tiles' conflict-free word loads).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
timeout 150 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(tail -n 1 $R/tests_model.log)"
tar -C $R -czf $OUT/results.tgz .
