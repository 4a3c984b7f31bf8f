#!/usr/bin/env bash
# Session 18 round HA (binaries 2a323d0 + the two patches prepared in session 17):
# the push barrier's __syncwarp under racecheck, the push test, the full int4 suite, then the
# LOWBIT_INT4_DECODE_LEAN16 experiment (16-row tiles in batches of 4 K steps, 5 stages).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 compute-sanitizer --tool racecheck $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/push_racecheck.log 2>&1; echo "racecheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $R/push_racecheck.log | sort | uniq -c | head -8
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
for xs in 0 2; do
  LOWBIT_INT4_DECODE_LEAN16=1 LOWBIT_INT4_DECODE_XSHARED=$xs timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*/Int4Gemm.*' > $R/lean_tests_xs$xs.log 2>&1; echo "lean tests xs=$xs rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/lean_tests_xs$xs.log
done
b() { local n=$1; shift; env "$@" timeout 40 $B/lowbit bench gemm --m 12,16 --path skinny --out $R/$n > $R/$n.log 2>&1
  echo "== $n $(grep '^| llama' $R/$n.md | awk -F'|' '{printf "%s/%s %s  ", $2,$5,$8}' | sed 's/llama3-//g')"; }
b plan LOWBIT_X=1
b lean LOWBIT_INT4_DECODE_LEAN16=1
b lean_xpf0 LOWBIT_INT4_DECODE_LEAN16=1 LOWBIT_INT4_DECODE_XPREFETCH=0
b plan2 LOWBIT_X=1
for xs in 0 2; do for w in 4 8; do for s in 1 2 4; do
  b lean_xs${xs}_w${w}s${s} LOWBIT_INT4_DECODE_LEAN16=1 LOWBIT_INT4_DECODE_XSHARED=$xs LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$s
done; done; done
echo "total $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
