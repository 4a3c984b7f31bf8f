#!/usr/bin/env bash
# Session 29 round TI (final code, binaries 14dde23): all GPU int4, model and codec tests, and the
# default moe table (MoE kernels unchanged since round SF; a check, not imported).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
timeout 30 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
timeout 60 $B/lowbit_tests_gpu_codec --gtest_brief=1 > $R/tests_codec.log 2>&1; echo "== codec rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_codec.log)"
tar -C $R -czf $OUT/results.tgz .
tar -C $R -czf $OUT/results.tgz .

tar -C $R -czf $OUT/results.tgz .
timeout 90 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "== moe rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/moe.log)"
tar -C $R -czf $OUT/results.tgz .
