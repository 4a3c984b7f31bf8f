#!/usr/bin/env bash
# Session 28 round SC: the MoE modes of the warp-specialized tile: their test (bit-identical to
# the pipelined tile), synccheck / racecheck on it, every GPU int4 test, and bench moe with WS
# never / always at the prefill sizes (same call).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 60 $T --gtest_filter='Int4MoePipelinedWs*:Int4GemmPipelinedWs*' > $R/tests_ws.log 2>&1; rc=$?
echo "== tests_ws rc=$rc $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_ws.log)"; grep -m5 -A8 "Failure" $R/tests_ws.log | head -40
tar -C $R -czf $OUT/results.tgz .
[ $rc -ne 0 ] && exit 1
timeout 100 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
tar -C $R -czf $OUT/results.tgz .
for ws in 1 2; do
LOWBIT_INT4_PIPE_WS=$((ws==1?0:2)) timeout 90 $B/lowbit bench moe --m 128,512,2048,8192 --reps 5 --out $R/moe_ws$ws > $R/moe_ws$ws.log 2>&1; echo "== moe ws=$ws rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/moe_ws$ws.log)"
tar -C $R -czf $OUT/results.tgz .
done
for tool in synccheck racecheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $T --gtest_filter='Int4MoePipelinedWs*' > $R/${tool}_moews.log 2>&1
  echo "== ${tool}_moews rc=$? $(( $(date +%s)-t0 ))s $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/${tool}_moews.log | tail -n 1)"
  tar -C $R -czf $OUT/results.tgz .
done
