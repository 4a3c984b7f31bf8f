#!/usr/bin/env bash
# Session 28 round SB: the WS epilogue stores by consumers only vs every warp (A/B, same binary,
# LOWBIT_INT4_WS_ALLSTORE, alternating twice), and kAuto at M = 129..256 after the rule change.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
for run in 1 2; do for a in 0 1; do
LOWBIT_INT4_WS_ALLSTORE=$a timeout 40 $B/lowbit_ab bench gemm --m 96,128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/ab${a}_$run > $R/ab${a}_$run.log 2>&1; echo "== ab$a run$run rc=$? $(( $(date +%s)-t0 ))s"
done; done
tar -C $R -czf $OUT/results.tgz .
timeout 60 $B/lowbit bench gemm --m 128,160,192,224,256,320,512 --shapes $S --reps 5 --cooldown-ms 200 --out $R/auto > $R/auto.log 2>&1; echo "== auto rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/auto.log)"
timeout 100 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"
tar -C $R -czf $OUT/results.tgz .
