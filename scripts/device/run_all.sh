#!/usr/bin/env bash
# One GPU round on the device machine: environment facts, then every component's device
# script (scripts/device/<component>.sh) with its own log under $OUT. Usage, from the repo
# root on the GPU machine:  BIN=dist/bin OUT=/some/dir scripts/device/run_all.sh [components...]
# QUICK=1 asks the component scripts for a reduced benchmark set. Results are gathered in
# a work folder and packed into $OUT/results.tgz (the device tool returns few files).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LOWBIT_SOURCE_DIR="$(pwd)"
: "${BIN:?BIN must point at the built binaries}"
: "${OUT:?OUT must name a results folder}"
FINAL_OUT="$OUT"
OUT=$(mktemp -d /tmp/lowbit-results.XXXX)
trap 'tar -C "$OUT" -czf "$FINAL_OUT/results.tgz" . ; cp "$OUT"/*.log "$FINAL_OUT"/ 2>/dev/null' EXIT
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  nvidia-smi topo -m
} > "$OUT/env.txt" 2>&1
comps=("$@")
[ ${#comps[@]} -eq 0 ] && comps=(codec allreduce int4 model)
summary=""
for c in "${comps[@]}"; do
  s=scripts/device/$c.sh
  if [ ! -x "$s" ] && [ ! -f "$s" ]; then summary+="$c: no script\n"; continue; fi
  t0=$(date +%s)
  mkdir -p "$OUT/$c"
  OUT="$OUT/$c" bash "$s" > "$OUT/$c.log" 2>&1
  rc=$?
  t1=$(date +%s)
  summary+="$c: rc=$rc ($((t1 - t0)) s)\n"
  echo "===== $c (rc=$rc, $((t1 - t0)) s): last lines"; tail -n 25 "$OUT/$c.log"
done
echo "===== summary"; printf "$summary"
