#!/usr/bin/env bash
# Session 61: where the dense decode kernel's warps wait at HEAD (x_early by rule), one launch each of 8b.o M = 1
# / 8 and 8b.qkv M = 1 (Nsight Compute: warp states and per-SASS-instruction stall samples; ncu serializes the
# launches, so no next launch streams beside them), then the SASS of the decode kernels (cuobjdump). Any card.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_ncu.sh", carry=[".dev/s61x"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61x; N=$OUT/n; mkdir -p $N
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $N/commit.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
for c in "llama3-8b.o 1" "llama3-8b.o 8" "llama3-8b.qkv 1"; do
  set -- $c
  timeout 150 $NCU --clock-control none --kernel-name regex:gemm_decode_kernel --launch-skip 5 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats --section Occupancy \
    --page details --print-details all $B/lowbit bench gemm --shapes $1 --m $2 --path skinny --dtype bf16 --reps 1 --out $N/b_$1_$2 > $N/ncu_$1_m$2.txt 2>&1
  echo "== $1 M=$2 rc $?"
  timeout 150 $NCU --clock-control none --kernel-name regex:gemm_decode_kernel --launch-skip 5 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    $B/lowbit bench gemm --shapes $1 --m $2 --path skinny --dtype bf16 --reps 1 --out $N/c_$1_$2 > $N/src_$1_m$2.csv 2>&1
  echo "== src $1 M=$2 rc $? $(wc -l < $N/src_$1_m$2.csv) lines"
done
grep -E "Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps|Stall|Registers Per|Duration|Grid Size|Block Size|Cluster" $N/ncu_*.txt | head -80
(cd $OUT && tar czf ncu.tgz n)
