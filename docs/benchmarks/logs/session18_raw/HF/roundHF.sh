#!/usr/bin/env bash
# Session 18 round HF (binaries of 6f56588): the pipelined kernel's tile rows x split-K ranks at
# M = 192..512 against its plan and kAuto (bf16, G = 128, eight Llama-3 projections).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
b() { local n=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 192,256,384,512 --path pipelined --reps 5 --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(grep '^| llama' $R/$n.md | awk -F'|' '{printf "%s/%s %s  ", $2,$5,$8}' | sed 's/llama3-//g')"; }
b plan LOWBIT_X=1
for rows in 64 128; do for s in 1 2 4 8; do b r${rows}s${s} LOWBIT_INT4_PIPE_ROWS=$rows LOWBIT_INT4_PIPE_SPLITS=$s; done; done
timeout 60 $B/lowbit bench gemm --m 192,256,384,512 --path auto,cublas --reps 5 --out $R/ref > $R/ref.log 2>&1; echo "== ref rc=$? $(grep '^| llama' $R/ref.md | awk -F'|' '{printf "%s/%s/%s %s  ", $2,$4,$5,$8}' | sed 's/llama3-//g')"
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
