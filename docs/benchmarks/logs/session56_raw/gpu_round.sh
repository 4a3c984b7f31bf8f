#!/usr/bin/env bash
# Session 56: HEAD's issue tables and GPU int4 suite from one device call at one commit. On an H200 the
# tables first (session 51's gpu_tables.sh under TOTAL s), then the suite; on any other card the suite
# only when TESTS=1 (HEAD's GPU code has not run the suite since session 55's review mend), else exit 3.
# The model suite runs in a second call on the warm machine (the CLI and both test binaries together pass
# the device tool's 64 MiB carry limit with the 47.3 MB tree).
# Stage (here, at HEAD): cmake --build build-marlin --target lowbit_cli; cmake --build build --target
# lowbit_tests_gpu_int4 lowbit_tests_gpu_model; strip each into .dev/s56x / s56i / s56m, xz -T2, COMMIT.
# run(command="bash docs/benchmarks/logs/session56_raw/gpu_round.sh", carry=[".dev/s56x", ".dev/s56i"], kind="nvidia-h200")
# then run(command="BIN=.dev/s56m bash docs/benchmarks/logs/session53_raw/gpu_tests.sh", carry=[".dev/s56m"])
set -u
nvidia-smi -L
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  TOTAL=${TOTAL:-300} BIN=.dev/s56x bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
elif [ "${TESTS:-0}" != 1 ]; then
  echo "not an H200: stopped"; exit 3
fi
BIN=.dev/s56i bash docs/benchmarks/logs/session53_raw/gpu_tests.sh
