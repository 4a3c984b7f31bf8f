#!/usr/bin/env bash
# Session 29 round TA (binaries 11871ec): all GPU int4 and model tests (the 96-row plan of 7658ab2
# and the M = 176 WS case of 5a1f759), kAuto at M = 129..192, then 96- vs 128-row tiles forced on
# every shape at M = 129..192 and 288..384 (--path pipelined, same call, twice).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
timeout 30 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
tar -C $R -czf $OUT/results.tgz .
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
timeout 60 $B/lowbit bench gemm --m 129,160,176,192 --shapes $S --reps 5 --cooldown-ms 200 --out $R/auto > $R/auto.log 2>&1; echo "== auto rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/auto.log)"
tar -C $R -czf $OUT/results.tgz .
for pass in 1 2; do for rows in 96 128; do
LOWBIT_INT4_PIPE_ROWS=$rows timeout 60 $B/lowbit bench gemm --m 129,160,192,288,320,384 --shapes $S --path pipelined --reps 5 --cooldown-ms 100 --out $R/rows${rows}_$pass > $R/rows${rows}_$pass.log 2>&1; echo "== rows$rows pass$pass rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/rows${rows}_$pass.log)"
tar -C $R -czf $OUT/results.tgz .
done; done
