#!/usr/bin/env bash
# Session 24 round NF (binaries of the final code: the single-token MoE path at M <= 2, <= 4 on
# small experts): GPU int4 tests, bench moe at small M (imported as moe_small_m.*) and the
# default bench moe (moe.*).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -n 1 $R/tests_int4.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
timeout 120 $B/lowbit bench moe --m 1,2,3,4,6,8,16 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b --path fused --reps 10 --out $R/moe_small_m > $R/moe_small_m.log 2>&1; echo "== small rc=$? $(( $(date +%s)-t0 ))s"; grep -E "qwen3|deepseek|mixtral" $R/moe_small_m.log; tail -1 $R/moe_small_m.log
tar -C $R -czf $OUT/results.tgz .
timeout 200 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "== moe rc=$? $(( $(date +%s)-t0 ))s"; grep -E "qwen3|deepseek|mixtral" $R/moe.log | awk '$4<=16'; tail -1 $R/moe.log
tar -C $R -czf $OUT/results.tgz .
