#!/usr/bin/env bash
# Session 58: one device call at HEAD's GPU code. On an H200: the GPU int4 suite, session 52's large-expert
# MoE rule on / off (session 57's H200 script: bf16, Mixtral and two large-expert shapes, M = 2..16,
# alternated passes under a 100 s guard), then the MoE plan's knobs on the rows that miss (gpu_moe_knobs.sh).
# On any other card the suite only when TESTS=1 (HEAD's host code changed: the MoE env knobs
# LOWBIT_INT4_MOE_WIDE / _YSUM parse like their twins), else exit 3.
# The model suite runs in a second call on the warm machine (carry limit, see session56_raw/gpu_round.sh).
# Stage (here, at HEAD): cmake --build build-marlin --target lowbit_cli; cmake --build build --target
# lowbit_tests_gpu_int4 lowbit_tests_gpu_model; strip each into .dev/s58x / s58i / s58m, xz -T2, COMMIT.
# GUARD / KGUARD (seconds) bound the on / off run and the knob probe, KSHAPES / KMS narrow the probe's shapes and Ms.
# run(command="bash docs/benchmarks/logs/session58_raw/gpu_round.sh", carry=[".dev/s58x", ".dev/s58i"], kind="nvidia-h200")
# then run(command="BIN=.dev/s58m bash docs/benchmarks/logs/session53_raw/gpu_tests.sh", carry=[".dev/s58m"])
set -u
nvidia-smi -L
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  BIN=.dev/s58i bash docs/benchmarks/logs/session53_raw/gpu_tests.sh
  BIN=.dev/s58x GUARD=${GUARD:-100} bash docs/benchmarks/logs/session57_raw/gpu_moe_large_h200.sh
  env ${KSHAPES:+SHAPES=$KSHAPES} ${KMS:+MS=$KMS} BIN=.dev/s58x GUARD=${KGUARD:-150} \
    bash docs/benchmarks/logs/session58_raw/gpu_moe_knobs.sh
elif [ "${TESTS:-0}" = 1 ]; then
  BIN=.dev/s58i bash docs/benchmarks/logs/session53_raw/gpu_tests.sh
else
  echo "not an H200: stopped"; exit 3
fi
