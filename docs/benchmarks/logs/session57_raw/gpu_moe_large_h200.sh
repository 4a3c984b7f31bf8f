#!/usr/bin/env bash
# Session 57: session 52's large-expert rule (kern::moe_large_expert_shape, 8-warp GEMM1 blocks for experts of
# >= 8 Mi elements at M <= 16) on and off (LOWBIT_INT4_MOE_LARGE_WARPS=0) on an H200, where session 57's table had
# Mixtral M = 8 / 16 at 1.03 / 1.05x session 47's time (before the rule). Session 52's H100 script, narrowed to bf16
# and three shapes under a 100 s guard to fit the device time left; on any other card it stops at once (exit 3).
# Not run in session 57 (no H200 came). Table: session52_raw/onoff_table.py on the l/ folder of moe_large.tgz.
# run(command="bash docs/benchmarks/logs/session57_raw/gpu_moe_large_h200.sh", carry=[".dev/s56x"], kind="nvidia-h200")
set -u
nvidia-smi -L
nvidia-smi -L | grep -q H200 || { echo "not an H200: stopped"; exit 3; }
BIN=${BIN:-.dev/s56x} SHAPES=${SHAPES:-mixtral-8x7b,8x6144x16384x2,128x4096x1536x8} MS=${MS:-2,4,8,12,16} DTYPES=bf16 \
  GUARD=${GUARD:-100} bash docs/benchmarks/logs/session52_raw/gpu_moe_large.sh
