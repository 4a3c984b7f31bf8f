#!/usr/bin/env bash
# Session 18 round HC (binaries 80d4610): DeviceWeights (the GPU tests now upload through it),
# its own tests under memcheck, the full int4 suite, the example program, the model tests.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 120 compute-sanitizer --tool memcheck --leak-check full $B/lowbit_tests_gpu_int4 --gtest_filter='Int4DeviceWeights*' > $R/device_weights_memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "OK \]|FAILED|PASSED|ERROR SUMMARY|LEAK SUMMARY|leaked" $R/device_weights_memcheck.log | head -12
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 60 $B/lowbit_example_int4_linear > $R/example_int4_linear.log 2>&1; echo "example rc=$?"; cat $R/example_int4_linear.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -1 $R/gpu_model.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
