#!/usr/bin/env bash
# Session 18 round HB (binaries b4d2007: the push barrier's __syncwarp, the epilogue's one
# rank-order loop): scripts/device/int4.sh end to end, the model tests, and the push cases
# under compute-sanitizer racecheck / synccheck / memcheck.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
STEP_TAIL=2 BIN=$B OUT=$R timeout 420 bash scripts/device/int4.sh > $R/int4_round.log 2>&1; echo "int4.sh rc=$? $(( $(date +%s)-t0 ))s"
sed -n '/=== int4 summary ===/,/^---/p' $R/int4_round.log | head -32
grep -h "total #wrong" $R/bench_*.log | sort | uniq -c
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -1 $R/gpu_model.log
for tool in racecheck synccheck memcheck; do
  timeout 60 compute-sanitizer --tool $tool $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/push_$tool.log 2>&1; echo "$tool rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $R/push_$tool.log | sort | uniq -c
done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
