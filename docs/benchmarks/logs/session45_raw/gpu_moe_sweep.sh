#!/usr/bin/env bash
# Session 45 (measurements only; binaries 9fbd75f, the MoE kernels of session 32): the MoE rows
# nearest the 50% (DeepSeek-V2-Lite TP2 at M = 16, 48.7%; at M = 8 45.6%; Qwen3-30B-A3B TP2
# at M = 8, 41.7%) under the decode tile's knobs: GEMM2's wide mode off, the block shape forced
# (both GEMMs), GEMM2's early ids off, align blocks of 8 / 16 rows, the single-token path up to
# M = 8; three alternated passes of `lowbit bench moe --shapes ... --m 8,16`.
# run(command="ONLY=H200 bash docs/benchmarks/logs/session45_raw/gpu_moe_sweep.sh", carry=[".dev/s45s"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45s; S=$OUT/m; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $S/gpu.csv; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
b() { local name=$1 extra=$2; shift 2; env "$@" timeout 60 $B/lowbit bench moe --shapes deepseek-v2-lite.tp2,qwen3-30b-a3b.tp2 --m 8,16 $extra --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  b def_$pass ""
  b wide0_$pass "" LOWBIT_INT4_MOE_WIDE=0
  b wide2_$pass "" LOWBIT_INT4_MOE_WIDE=2
  for ws in 8:1 8:2 4:1 4:2; do b w${ws%:*}s${ws#*:}_$pass "" LOWBIT_INT4_DECODE_WARPS=${ws%:*} LOWBIT_INT4_DECODE_SPLITS=${ws#*:}; done
  b early0_$pass "" LOWBIT_INT4_MOE_EARLY=0
  b bm8_$pass "--block-m 8"
  b bm16_$pass "--block-m 16"
  b single8_$pass "" LOWBIT_INT4_MOE_SINGLE_MAXM=8
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf moe_sweep.tgz m
