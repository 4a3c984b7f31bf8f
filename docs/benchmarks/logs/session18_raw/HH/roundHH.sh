#!/usr/bin/env bash
# Session 18 round HH (binaries of 3234030): data for the next session, no code change — at
# M = 17..32 the decode kernel (skinny) vs the pipelined kernel's 16 / 32-row tiles x split-K
# ranks, against kAuto and cuBLAS bf16 (bf16, G = 128, eight Llama-3 projections).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 60 $B/lowbit bench gemm --m 17,24,32 --path auto,skinny,pipelined --reps 5 --out $R/ref > $R/ref.log 2>&1; echo "== ref rc=$?"
for rows in 16 32; do for s in 1 2 4 8; do
  LOWBIT_INT4_PIPE_ROWS=$rows LOWBIT_INT4_PIPE_SPLITS=$s timeout 60 $B/lowbit bench gemm --m 17,24,32 --path pipelined --reps 5 --out $R/r${rows}s${s} > $R/r${rows}s${s}.log 2>&1; echo "== r${rows}s${s} rc=$?"
done; done
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
