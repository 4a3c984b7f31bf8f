#!/usr/bin/env bash
# One command for a fresh machine: install every dependency, fetch the model, build, and
# run the main job (perplexity of SmolLM2-135M on WikiText-2 under exact and quantized
# all-reduce). Usage: scripts/setup.sh [--no-run]
# Extra CMake options through LOWBIT_CMAKE_ARGS, e.g. the vLLM Marlin baseline of `bench gemm`:
#   LOWBIT_CMAKE_ARGS=-DLOWBIT_BENCH_VLLM_MARLIN=ON scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
if command -v apt-get >/dev/null; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends \
    build-essential cmake git python3 python3-pip libgtest-dev nlohmann-json3-dev >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements.txt

scripts/fetch_model.sh

# shellcheck disable=SC2086  # LOWBIT_CMAKE_ARGS is a list of options
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${LOWBIT_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"

if [ "${1:-}" != "--no-run" ]; then
  ./build/bin/lowbit ppl
fi
