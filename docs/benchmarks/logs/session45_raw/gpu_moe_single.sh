#!/usr/bin/env bash
# Session 45 (measurements only; binaries 9fbd75f): the H100 sweep (gpu_moe_sweep.sh) had the
# single-token path at M = 8 0.907x the four launches on Qwen3-30B-A3B TP2 (session 24 on the H200:
# 0.99x) and DeepSeek-V2-Lite TP2 at M = 16 in 8-warp blocks alone 0.978x. Here on the H200: the
# single-token path up to M = 8 (LOWBIT_INT4_MOE_SINGLE_MAXM=8) against the rule on the small-expert
# models at M = 3..8, and the forced 8-warp blocks at M = 16; three alternated passes.
# run(command="ONLY=H200 bash docs/benchmarks/logs/session45_raw/gpu_moe_single.sh", carry=[".dev/s45s"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45s; S=$OUT/q; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $S/gpu.csv; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
b() { local name=$1 shapes=$2 ms=$3; shift 3; env "$@" timeout 60 $B/lowbit bench moe --shapes $shapes --m $ms --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
SM=qwen3-30b-a3b.tp2,qwen3.5-35b-a3b,deepseek-v2-lite.tp2,qwen3-30b-a3b.tp1
for pass in 1 2 3; do
  b def_$pass $SM 3,4,5,6,8
  b single8_$pass $SM 3,4,5,6,8 LOWBIT_INT4_MOE_SINGLE_MAXM=8
  b dsdef_$pass deepseek-v2-lite.tp2,deepseek-v2-lite 16
  b dsw8s1_$pass deepseek-v2-lite.tp2,deepseek-v2-lite 16 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf moe_single.tgz q
