#!/usr/bin/env bash
# Session 29 round TF (branch exp/moe-ws-tma): MoE prefill on the warp-specialized tile, x by the
# producers' cp.async gather (SD/SE's) against x by one tensor copy of consecutive rows (a timing
# hack: wrong outputs, #wrong > 0 expected), and the previous tile (WS=0), alternated twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
for pass in 1 2; do for v in ws0 ws2 xtma; do
  case $v in ws0) ws=0; xt=0;; ws2) ws=2; xt=0;; xtma) ws=2; xt=1;; esac
  LOWBIT_INT4_PIPE_WS=$ws LOWBIT_INT4_PIPE_MOE_XTMA=$xt timeout 90 $B/lowbit bench moe --m 512,2048,8192 --reps 5 --out $R/${v}_$pass > $R/${v}_$pass.log 2>&1; echo "== $v pass$pass rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/${v}_$pass.log)"
  tar -C $R -czf $OUT/results.tgz .
done; done
