#!/usr/bin/env bash
# Session 26 round QB (binaries f71b71b, the production kernels): all GPU int4 and model tests
# (f71b71b's host change and be3d1f5's kernels had not run them), then Nsight Compute stall
# profiles with source counters: the pipelined kernel's 128-row wgmma tile (70b.gate_up M = 512)
# and the 16-row decode tile (70b.o M = 16, a target miss).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o
for rep in 1 2; do timeout 100 $B/lowbit bench gemm --m 128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 300 --out $R/g_prod_$rep > $R/g_prod_$rep.log 2>&1; echo "== g_prod_$rep rc=$? $(( $(date +%s)-t0 ))s"; done
grep -E "^\| llama" $R/g_prod_1.md | awk -F'|' '{print $2,$5,$8,$16,$17}'
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
prof() { local n=$1 k=$2; shift 2; timeout 150 $NCU --clock-control none -k regex:$k --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy $B/lowbit "$@" > $R/ncu_$n.txt 2>&1; echo "== ncu $n rc=$? $(( $(date +%s)-t0 ))s"; grep -E "Duration|Issue Slots Busy|Eligible Warps|Stall|warp_stall" $R/ncu_$n.txt | head -12; }
prof pipe128_70b_gate_up_m512 gemm_pipelined bench gemm --m 512 --shapes llama3-70b.gate_up --path pipelined --reps 1 --cooldown-ms 0 --out $R/n1
prof decode_70b_o_m16 gemm_decode bench gemm --m 16 --shapes llama3-70b.o --path skinny --reps 1 --cooldown-ms 0 --out $R/n2
tar -C $R -czf $OUT/results.tgz .
T=$B/lowbit_tests_gpu_int4
timeout 300 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
tar -C $R -czf $OUT/results.tgz .
timeout 150 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
LOWBIT_INT4_PIPE_WGMMA=0 timeout 120 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*pipelined*:Forced/*M100_N8192*:*Moe*' > $R/tests_mma.log 2>&1; echo "== tests_mma rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_mma.log)"
tar -C $R -czf $OUT/results.tgz .
