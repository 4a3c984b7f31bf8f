#!/usr/bin/env bash
# Session 14 round DF: compute-sanitizer (memcheck, racecheck) over the fused MoE layer at M = 1 / 8 / 16 / 64 (routing blocks of 256 / 256 / 512 / 1024 threads), binaries 01b311b.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=$OUT
CS=/usr/local/cuda/bin/compute-sanitizer; [ -x $CS ] || CS=$(command -v compute-sanitizer)
echo "sanitizer: $CS"
for tool in racecheck memcheck; do
  t1=$(date +%s)
  timeout 100 $CS --tool $tool --print-limit 20 $B/lowbit bench moe --m 1,8,16,64 --shapes qwen3-30b-a3b.tp2,deepseek-v2-lite --path fused --reps 1 --out /tmp/cs_$tool > $R/sanitizer_$tool.log 2>&1
  echo "$tool rc=$? $(( $(date +%s)-t1 ))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid' $R/sanitizer_$tool.log | head -5 | tr '\n' ' ')"
  grep -E "^\| (qwen|deep)" /tmp/cs_$tool.md | awk -F'|' '{printf "%s M%s wrong%s; ", $2, $5, $13}'; echo
done
