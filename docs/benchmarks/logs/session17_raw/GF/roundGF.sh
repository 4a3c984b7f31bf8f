#!/usr/bin/env bash
# Session 17 round GF (binaries cf854b0, kernels unchanged since): the push bit-identity cases
# (clusters of 2 and 3) under compute-sanitizer synccheck and racecheck.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
for tool in synccheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/push_$tool.log 2>&1; echo "$tool rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Hazard" $R/push_$tool.log | sort | uniq -c | head -8
done
tar -C $R -czf $OUT/results.tgz .
