#!/usr/bin/env bash
# Session 52 (measurements only; binaries of HEAD 0174736, CLI without Marlin): the MoE decode tile's
# block width at M = 4..16 across expert sizes. Session 14 (round DE, H200) saw 8-warp blocks make
# Mixtral 4-5% faster at M = 4..16 and the small-expert models 0-17% slower, too few shapes for a rule;
# session 46 added other models' layers. Configs: the plan, both GEMMs in 8-warp blocks
# (LOWBIT_INT4_DECODE_WARPS=8; GEMM2's wide mode keeps 4), GEMM1 alone in 8-warp blocks
# (LOWBIT_INT4_MOE_W13_SHAPE=8:1); three alternated passes of `lowbit bench moe --path fused`.
# run(command="bash docs/benchmarks/logs/session52_raw/gpu_moe_warps.sh", carry=[".dev/s52s"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s52s; S=$OUT/w; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
SH=${SHAPES:-mixtral-8x7b,8x6144x16384x2,128x4096x1536x8,128x4096x1408x8,qwen3-30b-a3b.tp1,deepseek-v2-lite,128x4096x384x8,256x7168x256x8}
t0=$(date +%s)
b() { local name=$1; shift; env "$@" timeout 100 $B/lowbit bench moe --shapes $SH --m ${MS:-4,8,12,16} --path fused --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  b def_$pass
  b w8_$pass LOWBIT_INT4_DECODE_WARPS=8
  b w13e8_$pass LOWBIT_INT4_MOE_W13_SHAPE=8:1
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
  [ $(( $(date +%s) - t0 )) -gt 400 ] && break
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf moe_warps.tgz w
