#!/usr/bin/env bash
# Session 19 round IA (pair tiles, uncommitted tree on top of db06f6a): correctness of the pair
# tiles forced at M = 9..16 (LOWBIT_INT4_DECODE_PAIR=2) incl. racecheck/synccheck of the push
# test, then bench gemm M = 9,12,16 default vs pair tiles under warps x splits, and the MoE
# align-block sweep (bench moe --block-m) at M = 32..2048.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
el() { echo "   [$(( $(date +%s)-t0 ))s]"; }
LOWBIT_INT4_DECODE_PAIR=2 timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Int4Gemm*' > $R/tests_pair.log 2>&1; echo "== tests_pair rc=$?"; tail -3 $R/tests_pair.log; el
LOWBIT_INT4_DECODE_PAIR=2 timeout 120 compute-sanitizer --tool racecheck $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/racecheck.log 2>&1; echo "== racecheck rc=$?"; tail -4 $R/racecheck.log; el
LOWBIT_INT4_DECODE_PAIR=2 timeout 120 compute-sanitizer --tool synccheck $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/synccheck.log 2>&1; echo "== synccheck rc=$?"; tail -3 $R/synccheck.log; el
timeout 60 $B/lowbit bench gemm --m 8,9,12,16 --path skinny --reps 5 --out $R/ref > $R/ref.log 2>&1; echo "== ref rc=$?"; el
LOWBIT_INT4_DECODE_PAIR=2 timeout 60 $B/lowbit bench gemm --m 9,12,16 --path skinny --reps 5 --out $R/pair > $R/pair.log 2>&1; echo "== pair rc=$?"; el
for w in 4 8; do for s in 1 2; do
  LOWBIT_INT4_DECODE_PAIR=2 LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$s timeout 60 $B/lowbit bench gemm --m 9,12,16 --path skinny --reps 5 --out $R/pair_w${w}s${s} > $R/pair_w${w}s${s}.log 2>&1; echo "== pair_w${w}s${s} rc=$?"
done; done; el
LOWBIT_INT4_DECODE_PAIR=2 timeout 60 $B/lowbit bench gemm --m 12,16 --path skinny --dtype fp16 --reps 5 --out $R/pair_fp16 > $R/pair_fp16.log 2>&1; echo "== pair_fp16 rc=$?"
timeout 60 $B/lowbit bench gemm --m 12,16 --path skinny --dtype fp16 --reps 5 --out $R/ref_fp16 > $R/ref_fp16.log 2>&1; echo "== ref_fp16 rc=$?"; el
for bm in 0 16 32 64 128; do
  timeout 75 $B/lowbit bench moe --m 32,128,512,2048 --block-m $bm --reps 3 --out $R/moe_bm$bm > $R/moe_bm$bm.log 2>&1; echo "== moe_bm$bm rc=$?"
done; el
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
