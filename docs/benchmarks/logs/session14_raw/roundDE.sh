#!/usr/bin/env bash
# Session 14 round DE: MoE GEMM1 block shape via LOWBIT_INT4_DECODE_SPLITS / _WARPS (binaries 01b311b), fused MoE M=2..16.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
S=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b
for cfg in base s2 s4 w8 w8s2 base2; do
  e=""; case $cfg in s2) e="LOWBIT_INT4_DECODE_SPLITS=2";; s4) e="LOWBIT_INT4_DECODE_SPLITS=4";; w8) e="LOWBIT_INT4_DECODE_WARPS=8";; w8s2) e="LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2";; esac
  t1=$(date +%s)
  env $e timeout 60 $B/lowbit bench moe --m 2,4,8,12,16 --path fused --shapes $S --out $R/moe_$cfg > $R/moe_$cfg.log 2>&1; echo "$cfg rc=$? $(( $(date +%s)-t1 ))s: $(grep -E '^\| [a-z]' $R/moe_$cfg.md | awk -F'|' '{gsub(/ /,"",$2); printf "%s/%s %s %s; ", substr($2,1,9), $5, $7, $13}')"
done
tar -C $R -czf $OUT/results.tgz .
