#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r6c
xz -d -T4 $D/lowbit.xz && chmod +x $D/lowbit
R=$OUT/r; mkdir -p $R
S=""
for t in tp2 tp4 tp8; do for p in qkv o gate_up down; do S="$S${S:+,}llama3-70b.$t.$p"; done; done
echo "== tp shapes"; timeout 200 $D/lowbit bench gemm --shapes $S --m 1,8,16,32,128,512 --out $R/gemm_tp_shards > $R/tp.log 2>&1; echo rc $?; grep -h "total #wrong" $R/tp.log
cd $OUT && tar czf results.tgz r
