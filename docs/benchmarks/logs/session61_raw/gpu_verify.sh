#!/usr/bin/env bash
# Session 61, after edf438d (bf16 8b.qkv in 8-warp pairs with the trigger after their first batches): MODE=tests
# runs the int4 GPU suite (.dev/s61j); MODE=bench the new plan against the old one forced
# (LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1: 8-warp blocks alone, the trigger by the rule) on
# 8b.qkv at M = 1, 2, 4, 8 in three alternated passes, then one pass of the plan on the neighbours (.dev/s61y).
# run(command="MODE=tests bash docs/benchmarks/logs/session61_raw/gpu_verify.sh", carry=[".dev/s61j"], kind="nvidia-h200")
# run(command="MODE=bench bash docs/benchmarks/logs/session61_raw/gpu_verify.sh", carry=[".dev/s61y"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
V=$OUT/v; mkdir -p $V
if [ "${MODE:-}" = tests ]; then
  for f in .dev/s61j/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s61j/*
  cat .dev/s61j/COMMIT > $V/commit.txt
  timeout 300 .dev/s61j/lowbit_tests_gpu_int4 --gtest_brief=1 > $V/int4.log 2>&1
  echo "== int4 rc $?"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $V/int4.log | head
  (cd $OUT && tar czf verify_tests.tgz v); exit 0
fi
B=.dev/s61y
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $V/commit.txt
for pass in 1 2 3; do
  for dt in bf16 fp16; do
    timeout 60 $B/lowbit bench gemm --shapes llama3-8b.qkv --m 1,2,4,8 --dtype $dt --reps 10 --cooldown-ms 100 --out $V/${dt}_e1_p$pass > $V/${dt}_e1_p$pass.log 2>&1 || echo "plan $dt p$pass rc $?"
    LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1 timeout 60 $B/lowbit bench gemm --shapes llama3-8b.qkv --m 1,2,4,8 --dtype $dt --reps 10 --cooldown-ms 100 --out $V/${dt}_e0_p$pass > $V/${dt}_e0_p$pass.log 2>&1 || echo "alone $dt p$pass rc $?"
  done
done
timeout 90 $B/lowbit bench gemm --m 1,8,16 --dtype bf16 --reps 10 --cooldown-ms 100 --out $V/all_plan > $V/all_plan.log 2>&1 || echo "all rc $?"
for f in $V/*_p*.md $V/all_plan.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
done | sort -k2,3 | tee $V/summary.txt
grep -h "total #wrong" $V/*.md | sort | uniq -c
(cd $OUT && tar czf verify_bench.tgz v)
