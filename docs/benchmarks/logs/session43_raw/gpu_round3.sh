#!/usr/bin/env bash
# Session 43's H200 call (if one starts): the whole GPU int4 suite on the issue's target machine, the
# MoE example, then the decode and MoE rows of the targets (bench gemm M = 1 / 8 / 16, bench
# moe M = 1 / 8 / 16) with the kernels unchanged since session 40's H200 table.
# Binaries: .dev/s43h (lowbit and the test binary of .dev/s43t, the MoE example of .dev/s43m)
# run(command="bash docs/benchmarks/logs/session43_raw/gpu_round3.sh", carry=[".dev/s43h"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r; mkdir -p $R
cat .dev/s43h/COMMIT > $R/commit.txt 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
for f in .dev/s43h/*.xz; do [ -e "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s43h/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T whole GPU int4 suite"; timeout 200 .dev/s43h/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|info  " $R/gpu_int4.log | head -8; el
echo "== E MoE example"; timeout 60 .dev/s43h/lowbit_example_int4_moe > $R/example_int4_moe.log 2>&1; echo rc $?; tail -1 $R/example_int4_moe.log; el
echo "== G dense decode"; timeout 120 .dev/s43h/lowbit bench gemm --m 1,8,16 --cooldown-ms 300 --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm_decode.log; el
echo "== M moe"; timeout 100 .dev/s43h/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b --m 1,8,16 --out $R/moe > $R/moe.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/moe.log; el
cd $OUT && tar czf results3.tgz r
