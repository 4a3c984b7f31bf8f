#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r5c
for f in $D/*.xz; do xz -d -T4 $f; done; chmod +x $D/lowbit*
R=$OUT/r; mkdir -p $R
echo "== gpu int4"; timeout 200 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo rc $?; tail -2 $R/gpu_int4.log
echo "== gpu codec"; timeout 60 $D/lowbit_tests_gpu_codec --gtest_brief=1 > $R/gpu_codec.log 2>&1; echo rc $?; tail -1 $R/gpu_codec.log
echo "== gpu model"; timeout 150 $D/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo rc $?; tail -1 $R/gpu_model.log
echo "== example"; timeout 60 $D/lowbit_example_int4_linear > $R/example.log 2>&1; echo rc $?; grep -h "OK\|FAIL" $R/example.log | head -4
echo "== ncu 32-row tile"
timeout 150 ncu --clock-control none --kernel-name regex:gemm_pipelined --launch-skip 0 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section SourceCounters --section ComputeWorkloadAnalysis \
  $D/lowbit bench gemm --shapes llama3-70b.gate_up --m 32 --path pipelined --reps 2 --cooldown-ms 0 --out $R/ncu_bench > $R/ncu32.txt 2>&1
echo rc $?; grep -c "Section:" $R/ncu32.txt; grep -i "warning\|error" $R/ncu32.txt | head -3
cd $OUT && tar czf results.tgz r
