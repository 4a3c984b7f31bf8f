#!/usr/bin/env bash
# Session 29 round TG: dequant + cuBLAS with slabs small enough to stay in L2 (LOWBIT_INT4_SLAB_MIB,
# with and without LOWBIT_INT4_OVERLAP=1) against the default 64 MiB slabs, --path cublas at
# M = 512 / 2048 / 4096 on all eight projections, two passes.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
for pass in 1 2; do for v in d64 s16 s16o s8o s32o; do
  unset LOWBIT_INT4_SLAB_MIB LOWBIT_INT4_OVERLAP
  case $v in d64) ;; s16) export LOWBIT_INT4_SLAB_MIB=16;; s16o) export LOWBIT_INT4_SLAB_MIB=16 LOWBIT_INT4_OVERLAP=1;;
    s8o) export LOWBIT_INT4_SLAB_MIB=8 LOWBIT_INT4_OVERLAP=1;; s32o) export LOWBIT_INT4_SLAB_MIB=32 LOWBIT_INT4_OVERLAP=1;; esac
  timeout 100 $B/lowbit bench gemm --m 512,2048,4096 --shapes $S --path cublas --reps 5 --cooldown-ms 100 --out $R/${v}_$pass > $R/${v}_$pass.log 2>&1; echo "== $v pass$pass rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/${v}_$pass.log)"
  tar -C $R -czf $OUT/results.tgz .
done; done
