#!/usr/bin/env bash
# Session 43 (measurements only): the leads of gpu_sweep.sh (8B shapes at M = 1 / 8 faster under
# other warps x split-K pairs than the plan's 8 warps in clusters of 2) in three alternating passes.
# run(command="ONLY=H200 bash docs/benchmarks/logs/session43_raw/gpu_sweep2.sh", carry=[".dev/s43h"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/s2; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt 2>&1; cat $R/gpu.txt
# ONLY=H200 (say): stop at once on another card (a call for nvidia-h200 may be given an H100).
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.txt; then echo "not an $ONLY: stopped"; exit 3; fi
for f in .dev/s43h/*.xz; do [ -e "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s43h/*
SH=llama3-8b.qkv,llama3-8b.o,llama3-8b.down
b() { timeout 40 .dev/s43h/lowbit bench gemm --shapes $SH --m 1,8 --path skinny --reps 5 --cooldown-ms 100 --out $R/$1 > $R/$1.log 2>&1 || echo "$1 rc $?"; }
t0=$(date +%s)
for pass in 1 2 3; do
  b def_$pass
  for ws in 8:1 4:1 4:2 4:3 8:3 8:4; do LOWBIT_INT4_DECODE_WARPS=${ws%:*} LOWBIT_INT4_DECODE_SPLITS=${ws#*:} b w${ws%:*}s${ws#*:}_$pass; done
  LOWBIT_INT4_DECODE_TRIGGER=1 b trig1_$pass
done
echo "done in $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf sweep2.tgz s2
