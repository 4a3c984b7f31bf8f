#!/usr/bin/env bash
# Session 17 round GA (binaries 278c55a): the push test edit (4feb59e) and the whole int4 GPU
# suite; env sweeps of the dense decode plan's warps x splits on the shapes just under target.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 60 $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/push_test.log 2>&1; echo "push rc=$? $(( $(date +%s)-t0 ))s"; grep -E "OK|FAIL|PASSED" $R/push_test.log | tail -8
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
S="llama3-70b.qkv,llama3-8b.down,llama3-8b.o,llama3-8b.qkv,llama3-70b.o"
timeout 60 $B/lowbit bench gemm --m 1,8 --path skinny --shapes $S --out $R/base > $R/base.log 2>&1; echo "base rc=$?"
for w in 4 8; do for s in 1 2 3 4; do
  LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$s timeout 60 $B/lowbit bench gemm --m 1,8 --path skinny --shapes $S --out $R/w${w}s${s} > $R/w${w}s${s}.log 2>&1; echo "w$w s$s rc=$? $(( $(date +%s)-t0 ))s"
done; done
timeout 60 $B/lowbit bench gemm --m 1,8 --path skinny --shapes $S --out $R/base2 > $R/base2.log 2>&1; echo "base2 rc=$?"
for f in base w4s1 w4s2 w4s3 w4s4 w8s1 w8s2 w8s3 w8s4 base2; do echo "== $f"; grep '^| llama' $R/$f.md | awk -F'|' '{print $2,$5,$8,$12,$16}'; done
tar -C $R -czf $OUT/results.tgz .
