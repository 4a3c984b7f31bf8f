#!/usr/bin/env bash
# Session 61, first call: chain_limit.cu with chains 6-8 (.dev/s61: the probe, xz), then the int4 GPU
# suite at the x_early rule (.dev/s61i), and its decode / MoE cases with LOWBIT_INT4_DECODE_XEARLY=2
# (every kFull tile) and =0 (none). Logs to $OUT/t; the tables print.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_tests.sh", carry=[".dev/s61", ".dev/s61i"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
T=$OUT/t; mkdir -p $T
for f in .dev/s61/*.xz .dev/s61i/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s61/* .dev/s61i/*
cat .dev/s61i/COMMIT > $T/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $T/gpu.csv 2>&1
timeout 120 .dev/s61/chain_limit > $T/chain_limit.md 2> $T/chain_limit.err; echo "== chain_limit rc $?"; cat $T/chain_limit.md
t0=$(date +%s)
E=.dev/s61i/lowbit_tests_gpu_int4
timeout 300 $E --gtest_brief=1 > $T/int4.log 2>&1
echo "== int4 (x_early rule) rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $T/int4.log | head
for e in 2 0; do
  LOWBIT_INT4_DECODE_XEARLY=$e timeout 200 $E --gtest_brief=1 --gtest_filter='*/Int4Gemm.*:Forced/*:*Moe*' > $T/int4_xearly$e.log 2>&1
  echo "== int4 decode/MoE XEARLY=$e rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $T/int4_xearly$e.log | head
done
(cd $OUT && tar czf tests.tgz t)
