#!/usr/bin/env bash
# Session 20 round JA: the wgmma 16-row decode tiles (DecodeCfg::WG) — (1) the leftover
# DeviceWeights test of 81248f4; (2) the GPU int4 suite (wgmma tiles at M = 9..16 by default),
# the forced cases on mma.sync (LOWBIT_INT4_DECODE_WGMMA=0, with and without XSHARED=2);
# (3) bench gemm M = 9,12,16 (bf16, fp16) wgmma vs mma.sync alternating twice, M = 1,8 once;
# (4) Nsight Compute of the wgmma tile at 70b.gate_up / 70b.down M = 16.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 60 $T --gtest_filter='Int4DeviceWeights*' > $R/tests_dw.log 2>&1; echo "== dw rc=$?"; tail -n 1 $R/tests_dw.log
timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*Int4GemmDecodePush*' > $R/tests_forced.log 2>&1; echo "== forced rc=$?"; tail -n 3 $R/tests_forced.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_forced.log | head -80
timeout 200 $T --gtest_brief=1 > $R/tests.log 2>&1; echo "== tests rc=$?"; tail -n 1 $R/tests.log
LOWBIT_INT4_DECODE_WGMMA=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*Int4GemmDecodePush*' > $R/tests_mma.log 2>&1; echo "== mma rc=$?"; tail -n 1 $R/tests_mma.log
LOWBIT_INT4_DECODE_WGMMA=0 LOWBIT_INT4_DECODE_XSHARED=2 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_xs.log 2>&1; echo "== xs rc=$?"; tail -n 1 $R/tests_xs.log
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool synccheck $T --gtest_filter='Forced/Int4Gemm.*M11_N4160*:Forced/Int4Gemm.*M15_N4160*' > $R/synccheck.log 2>&1; echo "== synccheck rc=$?"; tail -n 2 $R/synccheck.log
L=$B/lowbit
for rep in 1 2; do for v in wg mma; do
  E=1; [ $v = mma ] && E=0
  LOWBIT_INT4_DECODE_WGMMA=$E timeout 60 $L bench gemm --m 9,12,16 --path skinny --reps 10 --out $R/gemm_${v}_$rep > $R/gemm_${v}_$rep.log 2>&1; echo "== gemm_${v}_$rep rc=$?"
  LOWBIT_INT4_DECODE_WGMMA=$E timeout 60 $L bench gemm --m 12,16 --path skinny --dtype fp16 --reps 10 --out $R/gemm_fp16_${v}_$rep > $R/gemm_fp16_${v}_$rep.log 2>&1; echo "== gemm_fp16_${v}_$rep rc=$?"
done; done
grep -h 'total #wrong' $R/*.log | sort | uniq -c
for v in wg mma; do echo "-- $v"; grep -h "^| llama" $R/gemm_${v}_1.md | awk -F'|' '{printf "%s M=%s %s us %s%%floor %sx\n",$2,$5,$9,$13,$16}'; done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.per_cycle_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,smsp__warps_eligible.avg.per_cycle_active,launch__cluster_dim_x'
for c in "llama3-70b.gate_up 16" "llama3-70b.down 16"; do
  set -- $c
  timeout 100 $NCU --clock-control none --kernel-name regex:gemm_decode_kernel --launch-skip 2 --launch-count 1 --print-units base --metrics "$M" \
    $L bench gemm --shapes $1 --m $2 --path skinny --reps 2 --out $R/b > $R/ncu_${1}_m$2.txt 2>&1; echo "== ncu $1 M=$2 rc=$?"
done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
