#!/usr/bin/env bash
# Session 52: kern::moe_large_expert_shape (8-warp blocks for large experts' MoE GEMMs past one wave of
# 4-warp blocks) on and off (LOWBIT_INT4_MOE_LARGE_WARPS=0) in the same binaries, M = 2..16, bf16 and
# fp16, three alternated passes. The GPU int4 suite ran in the next call on the same machine (its binary
# in .dev/s52g: both binaries and the tracked tree passed the device tool's 64 MB carry limit):
# run(command="... timeout 300 .dev/s52g/lowbit_tests_gpu_int4 ...", carry=[".dev/s52g"])
# run(command="bash docs/benchmarks/logs/session52_raw/gpu_moe_large.sh", carry=[".dev/s52r"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s52r}; S=$OUT/l; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
# SHAPES, MS, DTYPES and GUARD (seconds before no further pass starts) narrow a run; unset, session 52's run.
SH=${SHAPES:-mixtral-8x7b,8x6144x16384x2,128x4096x1536x8,128x4096x1408x8}
t0=$(date +%s)
b() { local name=$1 dt=$2; shift 2; env "$@" timeout 100 $B/lowbit bench moe --shapes $SH --m ${MS:-2,3,4,8,12,16} --dtype $dt --path fused --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  for dt in ${DTYPES:-bf16 fp16}; do
    b ${dt}-off_$pass $dt LOWBIT_INT4_MOE_LARGE_WARPS=0
    b ${dt}-on_$pass $dt
  done
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
  [ $(( $(date +%s) - t0 )) -gt ${GUARD:-250} ] && break
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
(cd $OUT && tar czf moe_large.tgz l)
