#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r2c
xz -d -T4 $D/lowbit_base.xz && chmod +x $D/lowbit_base
L=$D/lowbit_base
R=$OUT/r; mkdir -p $R
SH=llama3-70b.gate_up,llama3-8b.gate_up,llama3-70b.qkv,llama3-8b.down,llama3-70b.down,llama3-70b.o
for i in 1 2; do
for s in 0 2 3 4 6 7 8; do
  echo "== splits $s pass $i"
  if [ $s = 0 ]; then timeout 60 $L bench gemm --shapes $SH --m 17,32,48,64 --path pipelined --reps 5 --out $R/s${s}_$i > $R/s${s}_$i.log 2>&1
  else LOWBIT_INT4_PIPE_SPLITS=$s timeout 60 $L bench gemm --shapes $SH --m 17,32,48,64 --path pipelined --reps 5 --out $R/s${s}_$i > $R/s${s}_$i.log 2>&1; fi
  echo rc $?
done
done
echo "== ncu"
timeout 150 ncu --clock-control none --kernel-name regex:gemm_pipelined_kernel --launch-skip 30 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --section SourceCounters \
  $L bench gemm --shapes llama3-70b.gate_up --m 32 --path pipelined --reps 2 --cooldown-ms 0 --out $R/ncu_bench > $R/ncu.txt 2>&1
echo rc $?
tail -5 $R/ncu.txt
cd $OUT && tar czf results.tgz r
