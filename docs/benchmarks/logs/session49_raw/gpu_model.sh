#!/usr/bin/env bash
# Session 49: the single-GPU model tests (TP runner at TP 1, the int4 MoE layer inside the model, GPU ops
# against fp64) with binaries of HEAD after the bounded GEMM1 rule (37ab2e4; commit in $BIN/COMMIT), run
# on the warm machine right after session48_raw/gpu_verify.sh. Only one-GPU kinds are lent.
# run(command="BIN=.dev/s49m bash docs/benchmarks/logs/session49_raw/gpu_model.sh", carry=[".dev/s49m"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s49m}; R=$OUT/m; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt 2>&1; cat $R/gpu.txt
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
timeout 150 $B/lowbit_tests_gpu_model > $R/gpu_model.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)" $R/gpu_model.log
grep -h "positions: max\|vs fp64\|vs tp1\|ppl tp\|graphed\|moe" $R/gpu_model.log | head -12
(cd $OUT && tar czf model.tgz m && rm -rf m)
