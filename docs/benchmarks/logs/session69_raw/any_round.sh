#!/usr/bin/env bash
# Session 69's staged device call (no device was lent in session 69). BIN: .dev/s69, the CLI (no Marlin) and
# lowbit_tests_gpu_int4 of the commit in its COMMIT file (one tar | xz archive, git-ignored; rebuild from that commit if
# gone: strip both, tar | xz -9e).
# run(command="tar xJf .dev/s69/s69.tar.xz -C .dev/s69 && rm .dev/s69/s69.tar.xz; BIN=.dev/s69 bash docs/benchmarks/logs/session69_raw/any_round.sh", carry=[".dev/s69"], kind="nvidia-h200", timeout_s=590)
# Move docs/benchmarks/logs/session29_raw/TC/traces.tar.xz and logs/session68_raw/results_h100_*.tar.xz out of the
# working tree for the call (the 64 MiB carry limit), then back.
# On an H200 (the issue's card): session 68's h200_round.sh (the int4 GPU suite, the issue's four tables, the
# clusters-of-4 A/B; ~370 s), then the 16-warp A/B without its tests if the time allows. On any other card: the
# 16-warp tests and A/B (gpu_w16.sh, ~150 s), then the 70B TP table at the current plan (session 68's any_round.sh,
# which on a card other than an H200 runs just that, ~120 s).
set -u
t0=$(date +%s)
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash docs/benchmarks/logs/session68_raw/h200_round.sh
  if [ $(( $(date +%s) - t0 )) -lt 420 ]; then SKIP_TESTS=1 bash docs/benchmarks/logs/session69_raw/gpu_w16.sh; fi
else
  bash docs/benchmarks/logs/session69_raw/gpu_w16.sh
  bash docs/benchmarks/logs/session68_raw/any_round.sh
fi
echo "[total $(( $(date +%s) - t0 )) s]"
