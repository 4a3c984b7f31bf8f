#!/usr/bin/env bash
# GPU round of the all-reduce component, on a 2x H200 machine (any N >= 2 works).
# env: BIN = directory with lowbit_tests_multigpu_allreduce and lowbit; OUT = results dir.
# Runs the multi-GPU tests (gtest XML + log), then the benchmark over 16K..1G.
# Budget: < 4 minutes (measured 2026-11-30: tests ~18 s, bench ~25 s, tunes ~30 s, env-launcher
# bench ~20 s); each part is bounded by `timeout` (worst case 60+60+40+30+45 s = 235 s).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
: "${BIN:?set BIN to the directory with the built binaries}"
: "${OUT:?set OUT to the results directory}"
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
export LOWBIT_SOURCE_DIR="$PWD"
nvidia-smi topo -m > "$OUT/allreduce_topo.txt" 2>&1 || true

echo "== multi-GPU tests"
timeout 60 "$BIN/lowbit_tests_multigpu_allreduce" --gtest_output="xml:$OUT/allreduce_tests.xml" \
  > "$OUT/allreduce_tests.log" 2>&1
test_rc=$?
tail -n 25 "$OUT/allreduce_tests.log"

echo "== bench"
timeout 60 "$BIN/lowbit" bench allreduce --sizes 16K:1G --modes all --iters 5 --reps 3 --out "$OUT/allreduce" \
  > "$OUT/allreduce_bench.log" 2>&1
bench_rc=$?
cat "$OUT/allreduce_bench.log"

echo "== bench --tune (num_sms sweep): small sizes one/two-shot + q4q4, large sizes quantized"
timeout 40 "$BIN/lowbit" bench allreduce --sizes 16K:8M --modes oneshot,twoshot,q4q4 --iters 5 --reps 3 \
  --tune --out "$OUT/allreduce_tune" > "$OUT/allreduce_tune.log" 2>&1
tune_rc=$?
timeout 30 "$BIN/lowbit" bench allreduce --sizes 16M:128M --modes twoshot,q8q8,q4q8,q4q4 --iters 3 --reps 3 \
  --tune --out "$OUT/allreduce_tune_large" > "$OUT/allreduce_tune_large.log" 2>&1
grep -hE "^tune" "$OUT/allreduce_tune.log" "$OUT/allreduce_tune_large.log" || tail -n 20 "$OUT/allreduce_tune.log"

echo "== bench with --launcher env (2 processes, create_from_nccl / CUDA IPC)"
rm -f "$OUT/allreduce_rdv"
( RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 timeout 45 "$BIN/lowbit" bench allreduce --launcher env \
    --rendezvous "$OUT/allreduce_rdv" --sizes 1M:64M --modes twoshot,q4q8 --iters 5 --reps 3 \
    --out "$OUT/allreduce_env_r1" > "$OUT/allreduce_env_rank1.log" 2>&1 ) &
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 timeout 45 "$BIN/lowbit" bench allreduce --launcher env \
  --rendezvous "$OUT/allreduce_rdv" --sizes 1M:64M --modes twoshot,q4q8 --iters 5 --reps 3 \
  --out "$OUT/allreduce_env" > "$OUT/allreduce_env.log" 2>&1
env_rc=$?
wait
tail -n 15 "$OUT/allreduce_env.log"; tail -n 3 "$OUT/allreduce_env_rank1.log"

echo "== summary: tests rc=$test_rc (124 = timed out), bench rc=$bench_rc, tune rc=$tune_rc, env-launcher rc=$env_rc"
grep -E "^\[  (PASSED|FAILED)" "$OUT/allreduce_tests.log" || true
exit $(( test_rc != 0 || bench_rc != 0 ))
