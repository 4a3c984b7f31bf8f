#!/usr/bin/env bash
# Session 57: session 52's large-expert rule (kern::moe_large_expert_shape, 8-warp GEMM1 blocks for experts of
# >= 8 Mi elements at M <= 16) on and off (LOWBIT_INT4_MOE_LARGE_WARPS=0) on an H200, where session 57's table had
# Mixtral M = 8 / 16 at 1.03 / 1.05x session 47's time (before the rule). bf16 only, alternated passes, a time guard;
# session 52's gpu_moe_large.sh is the H100 original (both dtypes). On any other card: stops at once (exit 3).
# run(command="bash docs/benchmarks/logs/session57_raw/gpu_moe_large_h200.sh", carry=[".dev/s56x"], kind="nvidia-h200")
# Table: python3 docs/benchmarks/logs/session52_raw/onoff_table.py l/   (after untarring moe_large.tgz)
set -u
nvidia-smi -L
nvidia-smi -L | grep -q H200 || { echo "not an H200: stopped"; exit 3; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s56x}; S=$OUT/l; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
SH=${SHAPES:-mixtral-8x7b,8x6144x16384x2,128x4096x1536x8}
t0=$(date +%s)
b() { local name=$1; shift; env "$@" timeout 60 $B/lowbit bench moe --shapes $SH --m 2,4,8,12,16 --dtype bf16 --path fused --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3 4; do
  b bf16-off_$pass LOWBIT_INT4_MOE_LARGE_WARPS=0
  b bf16-on_$pass
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
  [ $(( $(date +%s) - t0 )) -gt ${GUARD:-100} ] && break
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
(cd $OUT && tar czf moe_large.tgz l)
