#!/usr/bin/env bash
# Session 15 round EA: GPU check of fb14472 (int4 + model tests at HEAD) and a timeline trace
# (-DLOWBIT_INT4_TRACE=1 build of moe_decode.cu + bench_moe.cu) of the MoE decode modes.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 200 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $R/gpu_model.log
LOWBIT_INT4_TRACE_OUT=$R/tr timeout 150 $B/lowbit_trace bench moe --m 1,8 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --path fused --reps 3 --out $R/moe_trace > $R/trace.log 2>&1; echo "trace rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\|" $R/trace.log | head -12
LOWBIT_INT4_PDL=0 LOWBIT_INT4_TRACE_OUT=$R/trnopdl timeout 60 $B/lowbit_trace bench moe --m 1 --shapes qwen3-30b-a3b.tp1 --path fused --reps 3 --out $R/moe_trace_nopdl > $R/trace_nopdl.log 2>&1; echo "trace nopdl rc=$?"
ls -la $R | head -30
tar -C $R -czf $OUT/results.tgz .
