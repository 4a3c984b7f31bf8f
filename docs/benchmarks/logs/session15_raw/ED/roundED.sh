#!/usr/bin/env bash
# Session 15 round ED: relaxed polling, acq_rel hand-offs; trace per warp.
# MoE tests, bench M = 1 on / off, and a timeline trace of the token kernel.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*SingleToken*:*FusedMoe*' > $R/gpu_moe.log 2>&1; echo "moe tests rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_moe.log; grep -m3 -A8 "Failure" $R/gpu_moe.log | head -40
for env in "" "LOWBIT_INT4_MOE_TOKEN=0"; do
  tag=${env:+_off}
  env $env timeout 100 $B/lowbit bench moe --m 1 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b --path fused --reps 10 --out $R/moe_m1$tag > $R/bench_m1$tag.log 2>&1; echo "bench$tag rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "^ +(qwen|mixtral|deepseek)|wrong" $R/bench_m1$tag.log
done
LOWBIT_INT4_TRACE_OUT=$R/tr timeout 100 $B/lowbit_trace bench moe --m 1 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --path fused --reps 3 --out $R/moe_trace > $R/trace.log 2>&1; echo "trace rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^ +(qwen|mixtral|deepseek)" $R/trace.log
ls $R
tar -C $R -czf $OUT/results.tgz .
