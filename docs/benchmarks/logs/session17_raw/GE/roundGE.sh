#!/usr/bin/env bash
# Session 17 round GE (final code: push for clusters of 3, 4-warp clusters of 3 for 70b.qkv in bf16):
# scripts/device/int4.sh end to end, model tests, and the decode
# tables with the push off (LOWBIT_INT4_DECODE_PUSH=0) in the same round.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
STEP_TAIL=2 BIN=$B OUT=$R timeout 420 bash scripts/device/int4.sh > $R/int4_round.log 2>&1; echo "int4.sh rc=$? $(( $(date +%s)-t0 ))s"
sed -n '/=== int4 summary ===/,/^---/p' $R/int4_round.log | head -32
grep -h "total #wrong" $R/bench_*.log | sort | uniq -c
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -1 $R/gpu_model.log
LOWBIT_INT4_DECODE_PUSH=0 timeout 40 $B/lowbit bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode_pull > $R/bench_pull.log 2>&1; echo "pull gemm rc=$?"
LOWBIT_INT4_DECODE_PUSH=0 timeout 40 $B/lowbit bench moe --m 1,8,16 --out $R/moe_pull > $R/bench_moe_pull.log 2>&1; echo "pull moe rc=$?"
grep -E "^ +llama" $R/bench_pull.log | awk '{print $1, $4, $7, $11, $15}'
grep -E "^ +(qwen|deepseek|mixtral)" $R/bench_moe_pull.log | awk '{print $1, $4, $6, $9}'
# fp16 warps x splits sweep at M = 1 / 8 (record: fp16 keeps decode_shape's plans)
for w in 4 8; do for sp in 1 2 3; do
  LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$sp timeout 30 $B/lowbit bench gemm --m 1,8 --path skinny --dtype fp16 --out $R/f16_w${w}s${sp} > $R/f16_w${w}s${sp}.log 2>&1; echo "f16 w$w s$sp rc=$?"
done; done
timeout 30 $B/lowbit bench gemm --m 1,8 --path skinny --dtype fp16 --out $R/f16_plan > $R/f16_plan.log 2>&1
for f in f16_plan f16_w4s1 f16_w4s2 f16_w4s3 f16_w8s1 f16_w8s2 f16_w8s3; do echo "== $f $(grep '^| llama' $R/$f.md | awk -F'|' '{printf "%s/%s %s  ", $2,$5,$8}' | sed 's/llama3-//g')"; done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
