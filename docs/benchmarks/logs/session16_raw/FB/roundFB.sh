#!/usr/bin/env bash
# Session 16 round FB: 4 weight stages for the 8-row decode tiles (LOWBIT_INT4_DECODE_STAGES=4)
# vs 3 on dense M = 1 / 8 and MoE M = 1..16, same call; the int4 tests with 4 stages; a warps x
# splits (and x-shared / 8-row) sweep of the dense decode plan at M = 12 / 16.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }
sumg() { grep -E "^ +llama" $1 | awk '{print $1, $4, $7, $11, $15}'; }
summ() { grep -E "^ +(qwen|deepseek|mixtral)" $1 | awk '{print $1, $4, $6, $9}'; }
for rep in 1 2; do
  for st in 3 4; do
    LOWBIT_INT4_DECODE_STAGES=$st timeout 60 $B/lowbit bench gemm --m 1,8 --path skinny --out $R/g_s${st}_r$rep > $R/g_s${st}_r$rep.log 2>&1; echo "gemm stages=$st rep $rep rc=$? $(el)"
    LOWBIT_INT4_DECODE_STAGES=$st timeout 90 $B/lowbit bench moe --m 1,2,8,16 --path fused --out $R/m_s${st}_r$rep > $R/m_s${st}_r$rep.log 2>&1; echo "moe stages=$st rep $rep rc=$? $(el)"
  done
done
for rep in 1 2; do for st in 3 4; do echo "== gemm stages $st rep $rep"; sumg $R/g_s${st}_r$rep.log; echo "== moe stages $st rep $rep"; summ $R/m_s${st}_r$rep.log; done; done
LOWBIT_INT4_DECODE_STAGES=4 timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_s4.log 2>&1; echo "int4 stages=4 rc=$? $(el)"; tail -1 $R/gpu_int4_s4.log
run16() { local tag=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 12,16 --path skinny --out $R/d_$tag > $R/d_$tag.log 2>&1; echo "dense16 $tag rc=$? $(el)"; }
run16 default
run16 w4s1 LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=1
run16 w4s2 LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2
run16 w4s3 LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=3
run16 w8s1 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1
run16 w8s2 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2
run16 xs2 LOWBIT_INT4_DECODE_XSHARED=2
run16 xs0 LOWBIT_INT4_DECODE_XSHARED=0
run16 r8 LOWBIT_INT4_DECODE_ROWS16=0
run16 r8s4 LOWBIT_INT4_DECODE_ROWS16=0 LOWBIT_INT4_DECODE_STAGES=4
for f in $R/d_*.log; do echo "== $f"; sumg $f; done
rm -f $R/*.png $R/*.json
tar -C $R -czf $OUT/results.tgz .
