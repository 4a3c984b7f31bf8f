#!/usr/bin/env bash
# Session 15 round EB: the one-launch single-token MoE layer (moe_token.cu): int4 + model
# tests, memcheck of the single-token tests, bench moe M = 1 on vs off (LOWBIT_INT4_MOE_TOKEN=0).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*SingleToken*:*FusedMoe*' > $R/gpu_moe.log 2>&1; echo "moe tests rc=$? $(( $(date +%s)-t0 ))s"; tail -3 $R/gpu_moe.log; grep -m5 -B2 -A8 "Failure" $R/gpu_moe.log | head -60
for env in "" "LOWBIT_INT4_MOE_TOKEN=0"; do
  tag=${env:+_off}
  env $env timeout 100 $B/lowbit bench moe --m 1 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b --path fused --reps 10 --out $R/moe_m1$tag > $R/bench_m1$tag.log 2>&1; echo "bench$tag rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "^ +(qwen|mixtral|deepseek)|wrong" $R/bench_m1$tag.log
done
timeout 200 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_model.log
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*SingleToken*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | head -5
tar -C $R -czf $OUT/results.tgz .
