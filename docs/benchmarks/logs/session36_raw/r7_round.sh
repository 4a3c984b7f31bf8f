#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r7c
xz -d -T4 $D/lowbit.xz && chmod +x $D/lowbit
R=$OUT/r; mkdir -p $R
S=""
for t in tp2 tp4 tp8; do for p in qkv o gate_up down; do S="$S${S:+,}llama3-70b.$t.$p"; done; done
echo "== tp shapes forced"; timeout 400 $D/lowbit bench gemm --shapes $S --m 9,12,16,17,24,32,48 --path skinny,pipelined --reps 5 --cooldown-ms 500 --out $R/tp_forced > $R/tpf.log 2>&1; echo rc $?; grep -h "total #wrong" $R/tpf.log
cd $OUT && tar czf results.tgz r
