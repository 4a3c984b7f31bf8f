#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r3c
xz -d -T4 $D/lowbit_base.xz $D/lowbit_sa.xz && chmod +x $D/lowbit_*
R=$OUT/r; mkdir -p $R
echo "== ncu"
LOWBIT_INT4_PDL=0 timeout 200 ncu --clock-control none --kernel-name regex:gemm_pipelined --launch-skip 10 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section SourceCounters --section ComputeWorkloadAnalysis \
  $D/lowbit_base bench gemm --shapes llama3-70b.gate_up --m 32 --path pipelined --reps 2 --cooldown-ms 0 --out $R/ncu_bench > $R/ncu.txt 2>&1
echo rc $?; grep -c "Section" $R/ncu.txt
for i in 1 2; do for v in base sa; do
  echo "== gemm $v $i"; timeout 90 $D/lowbit_$v bench gemm --m 17,32,48,64 --path pipelined --reps 5 --out $R/g_${v}_$i > $R/g_${v}_$i.log 2>&1; echo rc $?
done; done
for i in 1 2; do for v in base sa; do
  echo "== moe $v $i"; timeout 90 $D/lowbit_$v bench moe --m 64,128,256 --reps 5 --out $R/m_${v}_$i > $R/m_${v}_$i.log 2>&1; echo rc $?
done; done
cd $OUT && tar czf results.tgz r
