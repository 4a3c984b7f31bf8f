#!/usr/bin/env bash
# Session 19 round IB (tree: 1 commit past db06f6a + the x ping-pong in decode_tile.cuh): GPU
# tests of the new code (full int4 suite, x sharing forced, x prefetch off, MoE on the decode
# tile, DeviceWeights under memcheck, the example), then A/B benches, old (lowbit_old: the same
# tree without the decode_tile.cuh change) and new alternating twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
el() { echo "   [$(( $(date +%s)-t0 ))s]"; }
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests.log 2>&1; echo "== tests rc=$?"; tail -n 2 $R/tests.log; el
LOWBIT_INT4_DECODE_XSHARED=2 timeout 80 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_xshared.log 2>&1; echo "== tests_xshared rc=$?"; tail -n 1 $R/tests_xshared.log
LOWBIT_INT4_DECODE_XPREFETCH=0 timeout 120 $T --gtest_brief=1 --gtest_filter='*Int4Gemm*:*Moe*' > $R/tests_xoff.log 2>&1; echo "== tests_xoff rc=$?"; tail -n 1 $R/tests_xoff.log
LOWBIT_INT4_MOE_PIPE=0 timeout 80 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_decode.log 2>&1; echo "== tests_moe_decode rc=$?"; tail -n 1 $R/tests_moe_decode.log; el
timeout 90 compute-sanitizer --tool memcheck --leak-check full $T --gtest_filter='Int4DeviceWeights*' > $R/memcheck_dw.log 2>&1; echo "== memcheck_dw rc=$?"; grep -E "PASSED|LEAK SUMMARY|ERROR SUMMARY|bytes leaked" $R/memcheck_dw.log | head -4
timeout 60 $B/lowbit_example_int4_linear > $R/example.log 2>&1; echo "== example rc=$?"; tail -n 3 $R/example.log; el
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --reps 10 --out $R/gemm_${v}_$rep > $R/gemm_${v}_$rep.log 2>&1; echo "== gemm_${v}_$rep rc=$?"
  timeout 60 $L bench gemm --m 1,8,16 --path skinny --dtype fp16 --reps 10 --out $R/gemm_fp16_${v}_$rep > $R/gemm_fp16_${v}_$rep.log 2>&1; echo "== gemm_fp16_${v}_$rep rc=$?"
  timeout 90 $L bench moe --m 1,8,16,32,128 --reps 10 --out $R/moe_${v}_$rep > $R/moe_${v}_$rep.log 2>&1; echo "== moe_${v}_$rep rc=$?"
done; el; done
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
