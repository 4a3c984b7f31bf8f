#!/usr/bin/env bash
# Session 61, after a683b30 (staged x on the 8-warp deep tiles at M = 17..32 too): MODE=tests the int4 GPU suite
# (.dev/s61n) and its dense decode cases with LOWBIT_INT4_DECODE_XW=0; MODE=bench (.dev/s61w) the plan against
# XW=0 at M = 17, 24, 32 (bf16 and fp16, two alternated passes) on 8b.down and the 70B TP shares, files named
# for scripts/compare_bench.py.
# run(command="MODE=tests bash docs/benchmarks/logs/session61_raw/gpu_m32.sh", carry=[".dev/s61n"], kind="nvidia-h200")
# run(command="MODE=bench bash docs/benchmarks/logs/session61_raw/gpu_m32.sh", carry=[".dev/s61w"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
W=$OUT/w; mkdir -p $W
if [ "${MODE:-}" = tests ]; then
  for f in .dev/s61n/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s61n/*
  cat .dev/s61n/COMMIT > $W/commit.txt
  timeout 300 .dev/s61n/lowbit_tests_gpu_int4 --gtest_brief=1 > $W/int4.log 2>&1
  echo "== int4 rc $?"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $W/int4.log | head
  LOWBIT_INT4_DECODE_XW=0 timeout 200 .dev/s61n/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*/Int4Gemm.*:Forced/*' > $W/int4_xw0.log 2>&1
  echo "== int4 dense decode, XW=0, rc $?"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $W/int4_xw0.log | head
  (cd $OUT && tar czf m32_tests.tgz w); exit 0
fi
B=.dev/s61w
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $W/commit.txt
SH=$(printf "llama3-8b.down,"; for t in 2 4 8; do for p in qkv o gate_up down; do printf "llama3-70b.tp$t.$p,"; done; done); SH=${SH%,}
for pass in 1 2; do
  for dt in bf16 fp16; do
    timeout 90 $B/lowbit bench gemm --shapes $SH --m 17,24,32 --dtype $dt --reps 10 --cooldown-ms 50 --out $W/${dt}_e1_p$pass > $W/${dt}_e1_p$pass.log 2>&1 || echo "plan $dt p$pass rc $?"
    LOWBIT_INT4_DECODE_XW=0 timeout 90 $B/lowbit bench gemm --shapes $SH --m 17,24,32 --dtype $dt --reps 10 --cooldown-ms 50 --out $W/${dt}_e0_p$pass > $W/${dt}_e0_p$pass.log 2>&1 || echo "xw0 $dt p$pass rc $?"
  done
done
grep -h "total #wrong" $W/*.log | sort | uniq -c
for f in $W/*_e*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s\n", n, $2, $6, $9}'
done | sort -k2,3 | awk '{split($1,a,"_"); k=a[1]" "$2" "$3; t[k]=t[k]" "a[2]"="$4} END{for (i in t) print i, t[i]}' | sort | awk '{e0=1e9; e1=1e9; for (i=4;i<=NF;i++){split($i,a,"="); if (a[1]=="e0" && a[2]<e0) e0=a[2]; if (a[1]=="e1" && a[2]<e1) e1=a[2]} r=e1/e0; if (r<0.98||r>1.02) printf "%s %s %s xw0=%.1f plan=%.1f %.3f\n", $1, $2, $3, e0, e1, r}'
(cd $OUT && tar czf m32_bench.tgz w)
