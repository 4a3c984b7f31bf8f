#!/usr/bin/env bash
# Session 28 round SA: consumer-only epilogue stores in the WS tiles (racecheck), every GPU int4 /
# model test on the commits not yet run on a GPU, the WS pipelined table, and the kAuto crossover
# at M = 129..512 (pipelined vs dequant + cuBLAS, same call).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 60 $T --gtest_filter='Int4GemmPipelinedWs*' > $R/tests_ws.log 2>&1; rc=$?
echo "== tests_ws rc=$rc $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_ws.log)"; grep -m5 -A8 "Failure" $R/tests_ws.log | head -30
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $T --gtest_filter='Int4GemmPipelinedWs*' > $R/racecheck_ws.log 2>&1
echo "== racecheck_ws rc=$? $(( $(date +%s)-t0 ))s $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $R/racecheck_ws.log | tail -n 2 | tr '\n' ' ')"
tar -C $R -czf $OUT/results.tgz .
timeout 100 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
timeout 30 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
tar -C $R -czf $OUT/results.tgz .
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
timeout 40 $B/lowbit bench gemm --m 96,128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/gemm_pipelined > $R/gp.log 2>&1; echo "== g_ws rc=$? $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
timeout 60 $B/lowbit bench gemm --m 160,192,224,256,320,384,448,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/x_pipe > $R/xp.log 2>&1; echo "== x_pipe rc=$? $(( $(date +%s)-t0 ))s"
timeout 60 $B/lowbit bench gemm --m 160,192,224,256,320,384,448,512 --shapes $S --path cublas --reps 5 --cooldown-ms 200 --out $R/x_cublas > $R/xc.log 2>&1; echo "== x_cublas rc=$? $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
