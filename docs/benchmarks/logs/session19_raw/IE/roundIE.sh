#!/usr/bin/env bash
# Session 19 round IE: are small-M rows after M = 8192 rows slowed by the GPU's power state?
# bench gemm over two shapes with --cooldown-ms 0 and 2000 (new option), and the second shape's
# small M alone.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-8b.o,llama3-8b.gate_up,llama3-70b.gate_up
timeout 90 $B/lowbit bench gemm --shapes $S --m 1,8,16,8192 --cooldown-ms 0 --out $R/cool0 > $R/cool0.log 2>&1; echo "cool0 rc=$? $(( $(date +%s)-t0 ))s"
timeout 90 $B/lowbit bench gemm --shapes $S --m 1,8,16,8192 --cooldown-ms 2000 --out $R/cool2000 > $R/cool2000.log 2>&1; echo "cool2000 rc=$? $(( $(date +%s)-t0 ))s"
sleep 5
timeout 60 $B/lowbit bench gemm --shapes $S --m 1,8,16 --out $R/small > $R/small.log 2>&1; echo "small rc=$? $(( $(date +%s)-t0 ))s"
for f in cool0 cool2000 small; do echo "== $f"; grep -E "^ +llama" $R/$f.log | awk '{print $1, $4, $7, $14}'; done
tar -C $R -czf $OUT/results.tgz .
