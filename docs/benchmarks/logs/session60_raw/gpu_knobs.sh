#!/usr/bin/env bash
# Session 60: the dense decode kernel's launch knobs on the two small shapes that miss 50% of the floor
# (8B o, 8B qkv; M = 1, 8), after session 59's probe (stream_limit_h200.md) showed that the bytes of one
# launch stream in 2.0 us when the next launch starts at the kernel's start and its blocks fit beside the
# running ones. Every LOWBIT_INT4_DECODE_WARPS x _SPLITS setting with _TRIGGER 0 and 1 (2 was rejected in
# session 29) once, between two runs of the plan. Before that, chain_limit.cu (built here as its header says, stripped into .dev/s60). Binaries: the CLI
# in $BIN (.dev/s58x, HEAD's GPU code 5a634b0).
# run(command="BIN=.dev/s58x bash docs/benchmarks/logs/session60_raw/gpu_knobs.sh", carry=[".dev/s58x", ".dev/s60"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:?BIN=staged folder}; K=$OUT/k; mkdir -p $K
nvidia-smi -L | tee $K/gpu.txt
cat $B/COMMIT > $K/commit.txt
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
[ -x .dev/s60/chain_limit ] && timeout 60 .dev/s60/chain_limit | tee $K/chain_limit.md
SH=llama3-8b.o,llama3-8b.qkv
one() {  # name, env...
  local name=$1; shift
  env "$@" timeout 60 $B/lowbit bench gemm --shapes $SH --m 1,8 --dtype bf16 --reps 10 --cooldown-ms 100 --out $K/$name > $K/$name.log 2>&1 || echo "$name rc $?"
  grep "^| llama" $K/$name.md 2>/dev/null | awk -F'|' -v n="$name" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
}
{
  one plan_a
  for w in 4 8; do for s in 1 2 3 4; do for t in 0 1; do
    one w${w}s${s}t${t} LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$s LOWBIT_INT4_DECODE_TRIGGER=$t
  done; done; done
  one plan_b
} | tee $K/summary.txt
(cd $OUT && tar czf knobs.tgz k)
