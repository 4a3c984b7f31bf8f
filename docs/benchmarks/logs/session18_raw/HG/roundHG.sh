#!/usr/bin/env bash
# Session 18 round HG (binaries of the wave-fill rows rule, pipelined_rows_for): the int4 suite
# (with the new 64-row cases), the rule against forced 128-row tiles at M = 129..320, and the
# gemm_medium tables again.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_int4 --gtest_filter='*M160_N10240*' > $R/gpu_int4_rows64.log 2>&1; echo "rows64 cases rc=$?"; grep -E 'OK \]|FAILED' $R/gpu_int4_rows64.log | head -4
b() { local n=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 129,160,192,256,320 --path pipelined --reps 5 --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(grep '^| llama' $R/$n.md | awk -F'|' '{printf "%s/%s %s  ", $2,$5,$8}' | sed 's/llama3-//g')"; }
b rule1 LOWBIT_X=1; b r128_1 LOWBIT_INT4_PIPE_ROWS=128
grep -h 'total #wrong' $R/rule*.md $R/r128*.md | sort | uniq -c
timeout 90 $B/lowbit bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto --path auto,skinny,pipelined,cublas --reps 5 --out $R/gemm_medium > $R/bench_gemm_medium.log 2>&1; echo "medium rc=$?"
LOWBIT_INT4_PIPE_WGMMA=0 timeout 60 $B/lowbit bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto --path pipelined --reps 5 --out $R/gemm_medium_mma > $R/bench_gemm_medium_mma.log 2>&1; echo "medium_mma rc=$?"
grep -h "total #wrong" $R/bench_gemm_medium*.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
