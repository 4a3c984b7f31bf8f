#!/usr/bin/env bash
# Session 61, final: MODE=tests the int4 GPU suite at HEAD's GPU code (.dev/s61k); MODE=bench (.dev/s61z) the
# plan against LOWBIT_INT4_DECODE_XW=0 (x from L2: the previous plan on these shapes) on the shapes whose 8-warp
# deep tiles now stage x, bf16 and fp16, M = 9, 12, 16, three alternated passes; then one pass of the default
# dense table at M = 1, 8, 9, 12, 16 (bf16) for the record.
# run(command="MODE=tests bash docs/benchmarks/logs/session61_raw/gpu_final.sh", carry=[".dev/s61k"], kind="nvidia-h200")
# run(command="MODE=bench bash docs/benchmarks/logs/session61_raw/gpu_final.sh", carry=[".dev/s61z"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
F=$OUT/f; mkdir -p $F
if [ "${MODE:-}" = tests ]; then
  for f in .dev/s61k/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s61k/*
  cat .dev/s61k/COMMIT > $F/commit.txt
  timeout 300 .dev/s61k/lowbit_tests_gpu_int4 --gtest_brief=1 > $F/int4.log 2>&1
  echo "== int4 rc $?"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $F/int4.log | head
  LOWBIT_INT4_DECODE_XW=0 timeout 200 .dev/s61k/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*/Int4Gemm.*:Forced/*' > $F/int4_xw0.log 2>&1
  echo "== int4 dense decode, XW=0, rc $?"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $F/int4_xw0.log | head
  (cd $OUT && tar czf final_tests.tgz f); exit 0
fi
B=.dev/s61z
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $F/commit.txt
SH=llama3-8b.down,llama3-70b.o,llama3-70b.tp2.down,llama3-70b.tp4.down,llama3-70b.tp8.gate_up
for pass in 1 2 3; do
  for dt in bf16 fp16; do
    timeout 60 $B/lowbit bench gemm --shapes $SH --m 9,12,16 --dtype $dt --reps 10 --cooldown-ms 50 --out $F/${dt}_e1_p$pass > $F/${dt}_e1_p$pass.log 2>&1 || echo "plan $dt p$pass rc $?"
    LOWBIT_INT4_DECODE_XW=0 timeout 60 $B/lowbit bench gemm --shapes $SH --m 9,12,16 --dtype $dt --reps 10 --cooldown-ms 50 --out $F/${dt}_e0_p$pass > $F/${dt}_e0_p$pass.log 2>&1 || echo "xw0 $dt p$pass rc $?"
  done
done
timeout 120 $B/lowbit bench gemm --m 1,8,9,12,16 --dtype bf16 --reps 10 --cooldown-ms 100 --out $F/table > $F/table.log 2>&1 || echo "table rc $?"
grep -h "total #wrong" $F/*.log | sort | uniq -c
grep "^| llama" $F/table.md | awk -F'|' '{gsub(/ /,""); print $2, $6, $9"us", $13"%", "x_cublas="$18, "x_marlin="$21}'
(cd $OUT && tar czf final_bench.tgz f)
