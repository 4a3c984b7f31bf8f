# Sourced by the component device scripts: the shared environment (NVLink multicast off,
# BIN/OUT checked) and `step NAME LIMIT_SECONDS CMD...`, which runs CMD under a time limit
# with its output in $OUT/NAME.log, records "NAME: rc=.. (.. s)" in $summary and prints the
# log's last $STEP_TAIL lines (default 30).
export NCCL_NVLS_ENABLE=0
export LOWBIT_SOURCE_DIR="${LOWBIT_SOURCE_DIR:-$(pwd)}"
: "${BIN:?BIN must point at the built binaries}"
: "${OUT:?OUT must name a results folder}"
mkdir -p "$OUT"
summary=""
step() {  # step NAME LIMIT_SECONDS CMD...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  summary+="$name: rc=$rc ($(( $(date +%s) - t0 )) s)\n"
  tail -n "${STEP_TAIL:-30}" "$OUT/$name.log"
}
