#!/usr/bin/env bash
# Session 19 round IC: (1) Nsight Compute stall reasons per issued instruction of the decode
# kernel as committed (lowbit_old: round IB's, 1c52a25), 70b.gate_up at M = 1 / 8 / 16 and
# 70b.down, 8b.qkv at M = 16 (real clocks); (2) A/B, old vs new (x loaded a batch ahead
# unconditionally in the kFull configurations: no kXNow copy of the loop, 7% less code),
# alternating twice; (3) the GPU int4 suite of the new code.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; t0=$(date +%s)
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.per_cycle_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,smsp__warps_eligible.avg.per_cycle_active'
for c in "llama3-70b.gate_up 1" "llama3-70b.gate_up 8" "llama3-70b.gate_up 16" "llama3-70b.down 16" "llama3-8b.qkv 16" "llama3-8b.qkv 1"; do
  set -- $c
  timeout 120 $NCU --clock-control none --kernel-name regex:gemm_decode_kernel --launch-skip 2 --launch-count 1 --print-units base --metrics "$M" \
    $B/lowbit_old bench gemm --shapes $1 --m $2 --path skinny --reps 2 --out $R/b > $R/ncu_${1}_m$2.txt 2>&1; echo "== $1 M=$2 rc=$?"
done
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests.log 2>&1; echo "== tests rc=$?"; tail -n 1 $R/tests.log
LOWBIT_INT4_DECODE_XPREFETCH=0 timeout 120 $T --gtest_brief=1 --gtest_filter='*Int4Gemm*:*Moe*' > $R/tests_xoff.log 2>&1; echo "== tests_xoff rc=$?"; tail -n 1 $R/tests_xoff.log
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --reps 10 --out $R/gemm_${v}_$rep > $R/gemm_${v}_$rep.log 2>&1; echo "== gemm_${v}_$rep rc=$?"
  timeout 60 $L bench gemm --m 1,8,16 --path skinny --dtype fp16 --reps 10 --out $R/gemm_fp16_${v}_$rep > $R/gemm_fp16_${v}_$rep.log 2>&1; echo "== gemm_fp16_${v}_$rep rc=$?"
  timeout 90 $L bench moe --m 1,8,16,32 --reps 10 --out $R/moe_${v}_$rep > $R/moe_${v}_$rep.log 2>&1; echo "== moe_${v}_$rep rc=$?"
done; done
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
