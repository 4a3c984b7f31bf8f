#!/usr/bin/env bash
# Runs every test: the CPU suite, the GPU and multi-GPU suites (they report SKIPPED when
# the machine has no GPU), the example programs, the install-and-consume check, and the CPU
# suite and the examples' CPU halves again under ASan + UBSan.
# Assumes scripts/setup.sh --no-run (or the same dependencies) has been run once.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="$(nproc)"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
(cd build && ctest --output-on-failure)

# Sanitizer build of the CPU code and CPU tests (CUDA is off in this configuration).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOWBIT_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -L 'cpu|example')
