#!/usr/bin/env bash
# Session 25 round PD (test binary of the workspace fix): GPU int4 tests (all), the pipelined and
# MoE cases on mma.sync only (where round PC failed), and the 48-row tiles forced.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
tt() { local n=$1 lim=$2 f=$3; shift 3; env "$@" timeout $lim $T --gtest_brief=1 --gtest_filter="$f" > $R/tests_$n.log 2>&1; echo "== tests_$n rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_$n.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_$n.log | head -30; }
tt mma 90 'Forced/Int4Gemm*pipelined*:Forced/*M100_N8192*:*Moe*' LOWBIT_INT4_PIPE_WGMMA=0
tar -C $R -czf $OUT/results.tgz .
tt int4 200 '*'
tar -C $R -czf $OUT/results.tgz .
