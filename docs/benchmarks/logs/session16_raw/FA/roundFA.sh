#!/usr/bin/env bash
# Session 16 round FA: GPU check of 564fddb (int4, model, MoE with the cluster sum forced/off,
# memcheck of the single-token cases with the cluster sum forced), plus a trace of the M = 8
# MoE layers and a warps x splits sweep of the MoE decode modes at M = 8 / 16.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(el)"; tail -1 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$? $(el)"; tail -1 $R/gpu_model.log
for v in 2 0; do LOWBIT_INT4_MOE_YSUM=$v timeout 60 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe_ysum$v.log 2>&1; echo "moe ysum=$v rc=$? $(el)"; tail -1 $R/gpu_moe_ysum$v.log; done
LOWBIT_INT4_MOE_YSUM=2 timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*SingleToken*' > $R/memcheck_ysum2.log 2>&1; echo "memcheck rc=$? $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck_ysum2.log | head -5
S=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite
timeout 60 $B/lowbit bench moe --m 8,16 --shapes $S --path fused --out $R/sw_default > $R/sw_default.log 2>&1; echo "sweep default rc=$? $(el)"
for cfg in "4 0" "8 0" "4 2" "8 2" "4 4"; do set -- $cfg
  LOWBIT_INT4_DECODE_WARPS=$1 LOWBIT_INT4_DECODE_SPLITS=$2 timeout 60 $B/lowbit bench moe --m 8,16 --shapes $S --path fused --out $R/sw_w$1s$2 > $R/sw_w$1s$2.log 2>&1; echo "sweep w$1 s$2 rc=$? $(el)"; done
for f in $R/sw_*.log; do echo "== $f"; grep -E "^ +(qwen|deepseek)" $f | awk '{print $1, $4, $6, $9}'; done
LOWBIT_INT4_TRACE_OUT=$R/tr timeout 90 $B/lowbit_trace bench moe --m 8 --shapes $S --path fused --reps 3 --out $R/moe_trace > $R/trace.log 2>&1; echo "trace rc=$? $(el)"
gzip $R/tr_*.csv; ls -la $R | head -40
tar -C $R -czf $OUT/results.tgz .
