#!/usr/bin/env bash
# Session 28 round SG: the pipelined kernel's row tiles forced (64 / 96 / 128) against the plan on the
# small and mid-size weights at M = 160..512 (--path pipelined, same call).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-8b.qkv,llama3-8b.o,llama3-8b.down,llama3-70b.o,llama3-70b.qkv
for rows in 0 64 96 128; do
LOWBIT_INT4_PIPE_ROWS=$rows timeout 40 $B/lowbit bench gemm --m 160,192,256,320,384,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/rows$rows > $R/rows$rows.log 2>&1; echo "== rows$rows rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/rows$rows.log)"
tar -C $R -czf $OUT/results.tgz .
done
