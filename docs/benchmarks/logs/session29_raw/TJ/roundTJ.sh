#!/usr/bin/env bash
# Session 29 round TJ (final code, binaries 3a201ec; lowbit_old = 14dde23): all GPU int4, model
# and codec tests; kAuto at M = 1024..4096 on all eight projections, the dequant slab plan
# against the previous binaries, alternated twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
timeout 30 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
timeout 60 $B/lowbit_tests_gpu_codec --gtest_brief=1 > $R/tests_codec.log 2>&1; echo "== codec rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_codec.log)"
tar -C $R -czf $OUT/results.tgz .
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
for pass in 1 2; do for bin in lowbit lowbit_old; do
  timeout 60 $B/$bin bench gemm --m 1024,2048,3072,4096 --shapes $S --reps 5 --cooldown-ms 100 --out $R/${bin}_$pass > $R/${bin}_$pass.log 2>&1; echo "== $bin pass$pass rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/${bin}_$pass.log)"
  tar -C $R -czf $OUT/results.tgz .
done; done
