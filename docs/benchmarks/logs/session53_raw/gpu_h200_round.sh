#!/usr/bin/env bash
# Session 53: the issue's INT4 tables (session 51's gpu_tables.sh, the Marlin CLI in $TABLES) and then the
# GPU test suites (gpu_tests.sh, the binaries in $TESTS), both at one commit, in one H200 call. Exit 3 on
# any other card, before anything runs (ANY_GPU=1 runs it anywhere).
# run(command="TABLES=.dev/s53t TESTS=.dev/s53g bash docs/benchmarks/logs/session53_raw/gpu_h200_round.sh",
#     carry=[".dev/s53t", ".dev/s53g"], kind="nvidia-h200")
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || [ -n "${ANY_GPU:-}" ] || { nvidia-smi -L; exit 3; }
BIN=$TABLES bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
BIN=$TESTS bash docs/benchmarks/logs/session53_raw/gpu_tests.sh
