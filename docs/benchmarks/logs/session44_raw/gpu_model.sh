#!/usr/bin/env bash
# Session 44: the single-GPU model tests (TP runner at TP 1, the int4 MoE layer inside the model,
# GPU ops against fp64) with binaries of the fresh clone's CI build (commit in .dev/s44m/COMMIT),
# after fused_moe's refactor into one plan (moe_resolved). No multi-GPU kind is lent this session.
# run(command="bash docs/benchmarks/logs/session44_raw/gpu_model.sh", carry=[".dev/s44m"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s44m; R=$OUT/m; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt 2>&1; cat $R/gpu.txt
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
timeout 120 $B/lowbit_tests_gpu_model > $R/gpu_model.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)" $R/gpu_model.log
grep -h "positions: max\|vs fp64\|vs tp1\|ppl tp\|graphed\|moe" $R/gpu_model.log | head -12
