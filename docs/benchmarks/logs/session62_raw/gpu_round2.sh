#!/usr/bin/env bash
# Session 62, the clusters-of-3 rule (dense_rows8_shape: 8-warp 8-row blocks in clusters of 3 on few groups and a
# long K) in HEAD's binaries (the tree and the carried folder must stay under 64 MiB, so one folder per call):
#  1. MODE=tests: the int4 GPU suite (.dev/s62t), or the model suite where .dev/s62m is carried instead;
#  2. MODE=bench (.dev/s62r, the CLI with vLLM's Marlin): the rule (e1) against pairs forced (e0: LOWBIT_INT4_DECODE_SPLITS=2, the plan before it) on the shapes it
#     moves and two it leaves (8b.o, 2816x8192), M = 1 / 4 / 8, bf16 and fp16, three alternated passes; then G = 32,
#     64, per-channel and asymmetric G = 128 (bf16, two passes);
#  3. on an H200 only, gpu_h200.sh (session 61's changes A/B and the dense table) with this CLI.
# run(command="MODE=tests bash docs/benchmarks/logs/session62_raw/gpu_round2.sh", carry=[".dev/s62t"], kind="nvidia-h200")
# run(command="MODE=bench bash docs/benchmarks/logs/session62_raw/gpu_round2.sh", carry=[".dev/s62r"], kind="nvidia-h200")
# MODE=all: both in one call, TEST_DIRS and BIN naming one carried folder that holds the int4 tests and a CLI built
# without Marlin (the two with Marlin exceed the carry limit):
# run(command="MODE=all TEST_DIRS=.dev/s62c BIN=.dev/s62c bash docs/benchmarks/logs/session62_raw/gpu_round2.sh", carry=[".dev/s62c"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
V=$OUT/r2; mkdir -p $V; nvidia-smi -L > $V/gpu.txt
t0=$(date +%s)
if [ "${MODE:-}" = tests ] || [ "${MODE:-}" = all ]; then
  for B in ${TEST_DIRS:-.dev/s62t .dev/s62m}; do
    [ -d $B ] || continue
    for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*; cat $B/COMMIT > $V/commit_$(basename $B).txt
    for t in $B/lowbit_tests_gpu_*; do
      timeout 400 $t --gtest_brief=1 > $V/$(basename $t).log 2>&1
      echo "== $(basename $t) rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|FAILED" $V/$(basename $t).log | head -20
    done
  done
  (cd $OUT && tar czf r2_tests.tgz r2); [ "$MODE" = tests ] && exit 0
fi
B=${BIN:-.dev/s62r}
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $V/commit.txt
SH=llama3-70b.tp8.qkv,llama3-70b.tp4.qkv,1024x8192,2048x8192,1024x14336,2048x14336,512x4096,1024x6144,llama3-8b.o,2816x8192
ab() {  # label pass extra...
  local l=$1 p=$2; shift 2
  timeout 90 $B/lowbit bench gemm --shapes $SH --m 1,4,8 "$@" --reps 10 --cooldown-ms 100 --out $V/ab/${l}_e1_p$p > $V/ab/${l}_e1_p$p.log 2>&1 || echo "$l e1 p$p rc $?"
  LOWBIT_INT4_DECODE_SPLITS=2 timeout 90 $B/lowbit bench gemm --shapes $SH --m 1,4,8 "$@" --reps 10 --cooldown-ms 100 --out $V/ab/${l}_e0_p$p > $V/ab/${l}_e0_p$p.log 2>&1 || echo "$l e0 p$p rc $?"
}
mkdir -p $V/ab $V/abg
for p in 1 2 3; do ab bf16 $p --dtype bf16; ab fp16 $p --dtype fp16; done
for p in 1 2; do ab g32 $p --dtype bf16 --group 32; ab g64 $p --dtype bf16 --group 64; ab gpc $p --dtype bf16 --group -1; ab asym $p --dtype bf16 --asym; done
mv $V/ab/g32_* $V/ab/g64_* $V/ab/gpc_* $V/ab/asym_* $V/abg/
for d in ab abg; do
  python3 scripts/compare_bench.py $V/$d $V/rule_$d "8-warp clusters of 3 (rule) vs pairs" > /dev/null 2>&1 || echo "compare $d failed"
  grep "^|" $V/rule_$d.md | head -80
done
find $V/ab $V/abg -name '*_p*.png' -delete; (cd $OUT && tar czf r2.tgz r2)
echo "[$(( $(date +%s) - t0 )) s]"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BIN=$B GEMM_S=${GEMM_S:-200} bash docs/benchmarks/logs/session61_raw/gpu_h200.sh
exit 0
