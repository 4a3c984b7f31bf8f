#!/usr/bin/env bash
# Session 16 round FD: split-K clusters of 2 with rank 1 pushing its sums (st.async into rank 0's
# receive buffer) vs rank 0's remote loads (LOWBIT_INT4_DECODE_PUSH=0): int4 tests with push,
# memcheck of the dense GEMM cases, dense M = 1 / 8 under the plan and with clusters off, MoE M = 1 / 8.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }
sumg() { grep -E "^ +llama" $1 | awk '{print $1, $4, $7, $11, $15}'; }
summ() { grep -E "^ +(qwen|deepseek|mixtral)" $1 | awk '{print $1, $4, $6, $9}'; }
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 (push) rc=$? $(el)"; tail -1 $R/gpu_int4.log
runm() { local tag=$1; shift; env "$@" timeout 60 $B/lowbit bench moe --m 1,8 --path fused --out $R/m_$tag > $R/m_$tag.log 2>&1; echo "moe $tag rc=$? $(el)"; }
rung() { local tag=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 1,8 --path skinny --out $R/g_$tag > $R/g_$tag.log 2>&1; echo "gemm $tag rc=$? $(el)"; }
for rep in 1 2; do
  rung push_$rep X=1
  rung pull_$rep LOWBIT_INT4_DECODE_PUSH=0
  rung s1_$rep LOWBIT_INT4_DECODE_SPLITS=1
  runm push_$rep X=1
  runm pull_$rep LOWBIT_INT4_DECODE_PUSH=0
done
for f in $R/g_*.log; do echo "== $f"; sumg $f; done
for f in $R/m_*.log; do echo "== $f"; summ $f; done
timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*/Int4Gemm.*:*SingleToken*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED|tests from" $R/memcheck.log | head -5
rm -f $R/*.png $R/*.json
tar -C $R -czf $OUT/results.tgz .
