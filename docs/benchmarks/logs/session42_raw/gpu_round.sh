#!/usr/bin/env bash
# Session 42's GPU round: session 41's parts A and G (docs/benchmarks/logs/session41_raw/gpu_round.sh)
# trimmed into one call for a short device budget, most important first, so that what is cut by the
# call's limit is the least needed (every log is written under $OUT as it goes, so a cut run still
# returns what finished). Binaries of main 287ba89 (.dev/s41m; later commits are CPU-side only).
# run(command="bash docs/benchmarks/logs/session42_raw/gpu_round.sh .dev/s41m", carry=[".dev/s41m"])
set -u
D=${1:-.dev/s41m}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r; mkdir -p $R
cat $D/COMMIT > $R/commit.txt 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
for f in $D/*.xz; do [ -e "$f" ] && xz -d -T8 "$f"; done; chmod +x $D/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
MOE_SHAPES=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b
echo "== P1 gpu int4 (all; the fold's tests, Int4MoeArgs.Refused)"; timeout 200 $D/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/gpu_int4.log | head -8; el
echo "== P2 MoE example"; timeout 60 $D/lowbit_example_int4_moe > $R/example_int4_moe.log 2>&1; echo rc $?; tail -1 $R/example_int4_moe.log; el
for v in fold act plain; do
  flag=""; [ $v = act ] && flag=--act-order; [ $v = fold ] && flag=--act-order-fold
  echo "== P3 moe $v"; timeout 100 $D/lowbit bench moe --shapes $MOE_SHAPES --m 1,8,16,128 $flag --out $R/moe_$v > $R/moe_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/moe_$v.log; el
done
echo "== P4 dense prefill M = 4096 / 8192"; timeout 150 $D/lowbit bench gemm --m 4096,8192 --cooldown-ms 300 --out $R/gemm_prefill > $R/gemm_prefill.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm_prefill.log; el
echo "== P5 dense decode"; timeout 120 $D/lowbit bench gemm --m 1,8,16,32,128 --cooldown-ms 300 --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm_decode.log; el
cd $OUT && tar czf results.tgz r
