#!/usr/bin/env bash
# Session 15 round EE: one-launch layer, hand-off lane 31 (lane 0 issues the copies) vs 0, and
# fewer stages (less in flight), bench M = 1; trace of the default.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*SingleToken*:*FusedMoe*' > $R/gpu_moe.log 2>&1; echo "moe tests rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_moe.log
for env in "X=1" "LOWBIT_INT4_MOE_TOKEN_LANE=0" "LOWBIT_INT4_MOE_TOKEN_STAGES=2" "LOWBIT_INT4_MOE_TOKEN_STAGES=3" "LOWBIT_INT4_MOE_TOKEN_STAGES=2 LOWBIT_INT4_MOE_TOKEN_LANE=0" "LOWBIT_INT4_MOE_TOKEN=0"; do
  tag=$(echo "$env" | tr ' =' '__')
  env $env timeout 60 $B/lowbit bench moe --m 1 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --path fused --reps 10 --out $R/moe_$tag > $R/bench_$tag.log 2>&1; echo "== $env rc=$?"
  grep -E "^ +(qwen|mixtral|deepseek)" $R/bench_$tag.log | awk '{print $1, $4, $6, $9}'
done
LOWBIT_INT4_TRACE_OUT=$R/tr timeout 100 $B/lowbit_trace bench moe --m 1 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --path fused --reps 3 --out $R/moe_trace > $R/trace.log 2>&1; echo "trace rc=$? $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
