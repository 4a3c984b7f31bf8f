#!/usr/bin/env bash
# Session 43's last call: the act-order suites with the fp16 exemption narrowed to the decode tile
# (gemm_resolved_path), then the whole GPU int4 suite.
# Stage: D=.dev/s43v; strip -o $D/lowbit_tests_gpu_int4 build/bin/lowbit_tests_gpu_int4 && xz $D/...
# run(command="bash docs/benchmarks/logs/session43_raw/gpu_round4.sh", carry=[".dev/s43v"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r4; mkdir -p $R; cat .dev/s43v/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
xz -d -T8 .dev/s43v/lowbit_tests_gpu_int4.xz && chmod +x .dev/s43v/lowbit_tests_gpu_int4
echo "== act-order suites"; timeout 60 .dev/s43v/lowbit_tests_gpu_int4 --gtest_filter='*ActOrder*' > $R/act_order.log 2>&1; echo rc $?
grep -E "^\[  (PASSED|FAILED)|info  " $R/act_order.log | head
echo "== whole GPU int4 suite"; timeout 200 .dev/s43v/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)" $R/gpu_int4.log | head -5
gzip -9 $R/gpu_int4.log
