#!/usr/bin/env bash
# What lowbit's INT4 weights cost SmolLM2-135M with GPTQ against round-to-nearest, in one run
# of one binary: `lowbit ppl` on the CPU (its default: 8 windows of 1024 tokens, simulated TP=2
# with bf16 partials, exact all-reduce). GPTQ calibrates on the text's last 8 windows [BOS, 1023
# tokens] (disjoint from the 8192 scored tokens); standard, and with each window's first row (the
# attention sink) weighted 1024x in the Hessians. Writes one JSON per row into $1 (default /tmp/pplg); assemble with
# ppl_gptq_table.py.
set -eu
out=${1:-/tmp/pplg}
mkdir -p "$out"
bin=${BIN:-build/bin/lowbit}
run() {  # name, args... (a row whose JSON exists is kept: a rerun finishes an interrupted table)
  local name=$1; shift
  echo "== $name: $*"
  if [ -e "$out/$name.json" ]; then grep -h "GPTQ:\|^exact" "$out/$name.log"; return; fi
  "$bin" ppl --device cpu "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1
  grep -h "GPTQ:\|^exact" "$out/$name.log"
}
G="--wquant gptq --calib-tokens 8192"
S="--wsink-weight 1024"
run as_loaded
run rtn_g64_sym --weights int4 --wgroup 64
run gptq_g64_sym --weights int4 --wgroup 64 $G
run gptq_g64_sym_sink --weights int4 --wgroup 64 $G $S
run gptq_g64_sym_sink_ao --weights int4 --wgroup 64 $G $S --wact-order
run rtn_g32_asym --weights int4 --wgroup 32 --wasym
run gptq_g32_asym --weights int4 --wgroup 32 --wasym $G
run gptq_g32_asym_ao --weights int4 --wgroup 32 --wasym $G --wact-order
run gptq_g32_asym_sink --weights int4 --wgroup 32 --wasym $G $S
run gptq_g32_asym_sink_ao --weights int4 --wgroup 32 --wasym $G $S --wact-order
run rtn_pc_asym --weights int4 --wgroup -1 --wasym
run gptq_pc_asym_sink --weights int4 --wgroup -1 --wasym $G $S
run gptq_pc_asym_sink_ao --weights int4 --wgroup -1 --wasym $G $S --wact-order
