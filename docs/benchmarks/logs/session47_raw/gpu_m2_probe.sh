#!/usr/bin/env bash
# Session 47: the Qwen3.5-35B-A3B M = 2 outlier of session 46 (H100: 27.1 us against 18.9 at M = 1
# and 30.2 at M = 3; 0.857x with GEMM2's wide mode off, 0.838x in 8-warp blocks alone) taken apart
# per kernel: Nsight Compute's gpu__time_duration of each single-token GEMM (serialized launches,
# no PDL overlap) for Qwen3.5 at M = 1 / 2 / 3 and Qwen3-30B-A3B TP2 at M = 2, under the default plan,
# LOWBIT_INT4_MOE_WIDE=0 and LOWBIT_INT4_DECODE_WARPS=8 + SPLITS=1; then the CUDA-graph times of
# the same four variants (plus both knobs at once) at M = 1..4, three alternated passes.
# Binaries: .dev/s46c (the plain CLI; kernels of 354c93a).
# run(command="bash docs/benchmarks/logs/session47_raw/gpu_m2_probe.sh", carry=[".dev/s46c"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s46c; S=$OUT/p; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
V=("def" "wide0 LOWBIT_INT4_MOE_WIDE=0" "w8s1 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1" "both LOWBIT_INT4_MOE_WIDE=0 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1")
for v in "${V[@]:0:3}"; do set -- $v; name=$1; shift
  for sm in qwen3.5-35b-a3b:1 qwen3.5-35b-a3b:2 qwen3.5-35b-a3b:3 qwen3-30b-a3b.tp2:2; do
    sh=${sm%:*}; m=${sm#*:}
    env "$@" timeout 60 $NCU --cache-control none --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
      -k regex:gemm_decode --launch-skip 20 --launch-count 4 $B/lowbit bench moe --shapes $sh --m $m --path fused --reps 3 --out $S/ncu_b > $S/ncu_${name}_${sh}_m$m.log 2>&1
    echo "ncu $name $sh M=$m rc=$?: $(grep -E 'gpu__time_duration|launch__grid_size|launch__block_size' $S/ncu_${name}_${sh}_m$m.log | awk '{print $NF}' | tr '\n' ' ')"
  done
done; echo "  [$(( $(date +%s) - t0 )) s]"
b() { local name=$1; shift; env "$@" timeout 50 $B/lowbit bench moe --shapes qwen3.5-35b-a3b,qwen3-30b-a3b.tp2 --m 1,2,3,4 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  [ $(( $(date +%s) - t0 )) -gt 420 ] && { echo "out of time before pass $pass"; break; }
  for v in "${V[@]}"; do set -- $v; name=$1; shift; b ${name}_$pass "$@"; done
done; echo "  [$(( $(date +%s) - t0 )) s]"
grep -h "total #wrong" $S/*_[123].log | sort | uniq -c
cd $OUT && tar czf m2_probe.tgz p && rm -rf p
