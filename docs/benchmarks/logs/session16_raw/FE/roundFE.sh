#!/usr/bin/env bash
# Session 16 round FE (final code: split-K push, its in-process bit-identity test and the
# int4.sh step with it off): scripts/device/int4.sh end to end, model tests, and the decode
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
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
