#!/usr/bin/env bash
# Session 17 round GC (binaries ad34d48): int4 GPU suite; fp16 70b.qkv at M = 1..8 with the
# new plan vs 8 warps alone (round GB's fp16 M = 8 23.0 vs 19.3 us), twice; Nsight Compute of the
# decode kernel at 70b.gate_up M = 16 vs 8 (where 16-row tiles cost 1.65x 8-row tiles).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
S=llama3-70b.qkv
run() { local n=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 1,2,4,8 --path skinny --shapes $S $EXTRA --out $R/$n > $R/$n.log 2>&1; echo "$n rc=$?"; }
for i in 1 2; do for v in "fp16:--dtype fp16" "bf16:" "g32:--group 32"; do
  n=${v%%:*}; EXTRA=${v#*:}
  run new_${n}_$i LOWBIT_X=1; run old_${n}_$i LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1
done; done
for f in new_fp16_1 old_fp16_1 new_fp16_2 old_fp16_2 new_bf16_1 old_bf16_1 new_bf16_2 old_bf16_2 new_g32_1 old_g32_1 new_g32_2 old_g32_2; do echo "== $f $(grep '^| llama' $R/$f.md | awk -F'|' '{printf "M%s %s/%s  ", $5,$8,$16}')"; done
echo "t=$(( $(date +%s)-t0 ))s"
NCU=/usr/local/cuda/bin/ncu
for m in 16 8; do
  timeout 100 $NCU --clock-control none --kernel-name regex:gemm_decode --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats $B/lowbit bench gemm --m $m --shapes llama3-70b.gate_up --path skinny --reps 1 --out $R/ncu_d$m > $R/ncu_gate_up_m$m.txt 2>&1; echo "ncu m=$m rc=$? t=$(( $(date +%s)-t0 ))s"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots|Executed Ipc|Stall|L2 Hit|DRAM Through|Pipe|Block Size|Grid Size|Executed Instructions  " $R/ncu_gate_up_m$m.txt | head -40
done
timeout 120 $NCU --clock-control none --kernel-name regex:gemm_decode --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv $B/lowbit bench gemm --m 16 --shapes llama3-70b.gate_up --path skinny --reps 1 --out $R/s > $R/ncu_source_m16.csv 2>&1; echo "ncu src rc=$? t=$(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
