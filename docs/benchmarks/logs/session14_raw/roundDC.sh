#!/usr/bin/env bash
# Session 14 round DC: route variants: a (one kernel, runtime topk variant), b (host-chosen topk variant per kernel), c (b, scan for <= 2 experts per lane), old.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 200 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_b.log 2>&1; echo "int4 tests (b) rc=$? $(( $(date +%s)-t0 ))s"; grep -E "FAILED|PASSED|Failure" $R/gpu_int4_b.log | head -12
for rep in 1 2; do
  for v in a b c old; do
    t1=$(date +%s)
    timeout 150 $B/lowbit_$v bench moe --m 1,2,4,8,12,16,32,64 --path fused --out $R/moe_${v}_r$rep > $R/moe_${v}_r$rep.log 2>&1; echo "bench $v rep $rep rc=$? $(( $(date +%s)-t1 ))s"
  done
done
NCU=/usr/local/cuda/bin/ncu
for v in a b c old; do
  for m in 2 8; do
    timeout 60 $NCU --cache-control none --clock-control none --metrics gpu__time_duration.sum -k 'regex:moe_route|gemm_decode|moe_sum' --launch-skip 40 --launch-count 8 $B/lowbit_$v bench moe --m $m --path fused --reps 3 --shapes deepseek-v2-lite > $R/ncu_${v}_m$m.log 2>&1
    echo "ncu $v m=$m rc=$?: $(grep -E '^  [a-zA-Z_ ]*(void|unnamed|lowbit)|gpu__time_duration' $R/ncu_${v}_m$m.log | sed -E 's/\(.*//; s/ +/ /g; s/void unnamed>::gemm_decode_kernel<__nv_bfloat16, unnamed>::DecodeCfg/G/; s/gpu__time_duration.sum us//' | tr '\n' ' ' | cut -c1-700)"
  done
done
timeout 90 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis -k 'regex:gemm_decode|moe_route' --launch-skip 30 --launch-count 3 $B/lowbit_b bench moe --m 8 --path fused --reps 3 --shapes qwen3-30b-a3b.tp2 > $R/ncu_full_tp2_m8.log 2>&1; echo "ncu full rc=$?"
tar -C $R -czf $OUT/results.tgz .
