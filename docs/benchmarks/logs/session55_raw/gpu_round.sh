#!/usr/bin/env bash
# Session 55: one device call at one commit. On an H200 first the issue's INT4 tables (session 51's
# gpu_tables.sh, TOTAL s); on any card the MoE trigger rule against GEMM2's trigger at its start
# (LOWBIT_INT4_MOE_TRIGGER unset vs 0, in the same binary), three alternated passes, M = 1 / 2 / 4 / 8 /
# 16; then the GPU int4 suite. (c6c4055's CLI beside this one would pass the device tool's 64 MiB carry
# limit with the 47.3 MB tree; the model suite runs in a second call on the warm machine.)
# Stage: the CLI (with Marlin) in .dev/s55x and lowbit_tests_gpu_int4 in .dev/s55i, as the headers of
# gpu_moe_trigger.sh and session53_raw/gpu_tests.sh say.
# run(command="bash docs/benchmarks/logs/session55_raw/gpu_round.sh", carry=[".dev/s55x", ".dev/s55i"])
set -u
nvidia-smi -L
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  TOTAL=${TOTAL:-300} BIN=.dev/s55x bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
fi
CFGS="def 0" MS=1,2,4,8,16 BUDGET=${BUDGET:-100} bash docs/benchmarks/logs/session55_raw/gpu_moe_trigger.sh
BIN=.dev/s55i bash docs/benchmarks/logs/session53_raw/gpu_tests.sh
