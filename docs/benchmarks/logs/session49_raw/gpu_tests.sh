#!/usr/bin/env bash
# Session 49: the GPU tests on an H200 (exit 3 on any other card): the whole GPU int4 suite, then the
# single-GPU model tests, binaries of HEAD (kernels of 37ab2e4; commit in $BIN/COMMIT; both test binaries in
# one carry, the CLI stays out to keep the tree under its limit). Only one-GPU kinds are lent.
# run(command="bash docs/benchmarks/logs/session49_raw/gpu_tests.sh", carry=[".dev/s49h"], kind="nvidia-h200"); ANY_GPU=1
# runs them on whatever card came (session 49: an H100, results_h100_tests_3c03f6d.tgz).
set -u
nvidia-smi -L; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || [ -n "${ANY_GPU:-}" ] || exit 3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s49h}; R=$OUT/t; mkdir -p $R; pack() { (cd $OUT && tar czf tests.tgz t); }
cat $B/COMMIT > $R/commit.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
echo "== int4"; timeout 240 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo "rc $? [$(( $(date +%s) - t0 )) s]"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED TEST" $R/gpu_int4.log | head -12; pack
echo "== model"; timeout 150 $B/lowbit_tests_gpu_model > $R/gpu_model.log 2>&1; echo "rc $? [$(( $(date +%s) - t0 )) s]"
grep -E "^\[  (PASSED|FAILED|SKIPPED)" $R/gpu_model.log; grep -h "positions: max" $R/gpu_model.log | head -3
pack; rm -rf $R
