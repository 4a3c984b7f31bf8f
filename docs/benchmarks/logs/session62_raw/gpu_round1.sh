#!/usr/bin/env bash
# Session 62, first round: on an H200 the H200 A/B + dense table (session61_raw/gpu_h200.sh with BIN=.dev/s62x) after the split-3 A/B; on any
# other card the split-3 A/B alone (gpu_split3.sh).
# run(command="bash docs/benchmarks/logs/session62_raw/gpu_round1.sh", carry=[".dev/s62x"], kind="nvidia-h200")
D=docs/benchmarks/logs/session62_raw
bash $D/gpu_split3.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BIN=.dev/s62x GEMM_S=${GEMM_S:-200} bash $D/../session61_raw/gpu_h200.sh
exit 0
