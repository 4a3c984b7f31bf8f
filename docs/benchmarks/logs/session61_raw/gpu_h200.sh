#!/usr/bin/env bash
# Session 61: on an H200 only (exit 3 on any other card): the x_early rule against LOWBIT_INT4_DECODE_XEARLY=0
# (gpu_bench.sh, three alternated passes), then the issue's tables at HEAD's kernels (session 51's gpu_tables.sh
# under TOTAL s), all with the CLI staged in .dev/s61x (binaries 5d961a4, vLLM's Marlin built in).
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_h200.sh", carry=[".dev/s61x"], kind="nvidia-h200")
set -u
nvidia-smi -L; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: stopped"; exit 3; }
bash docs/benchmarks/logs/session61_raw/gpu_bench.sh > $OUT/xearly.log 2>&1; tail -3 $OUT/xearly.log
TOTAL=${TOTAL:-380} BIN=.dev/s61x bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
