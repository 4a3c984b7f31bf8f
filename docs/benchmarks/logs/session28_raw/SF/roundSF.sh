#!/usr/bin/env bash
# Session 28 round SF (final code): the WS test, all GPU int4 and model tests, the kAuto gemm table,
# the pipelined table and the moe table.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 100 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
timeout 30 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
tar -C $R -czf $OUT/results.tgz .
timeout 60 $B/lowbit bench gemm --out $R/gemm > $R/gemm.log 2>&1; echo "== gemm rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/gemm.log)"
tar -C $R -czf $OUT/results.tgz .
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
timeout 40 $B/lowbit bench gemm --m 32,48,64,96,128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/gemm_pipelined > $R/gp.log 2>&1; echo "== g_ws rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/gp.log)"
tar -C $R -czf $OUT/results.tgz .
timeout 90 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "== moe rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/moe.log)"
tar -C $R -czf $OUT/results.tgz .
