#!/usr/bin/env bash
# Session 55 (measurements only): where the MoE decode tile's blocks let the next launch start.
# Sessions 9 and 29 measured it for the dense kernel only; the MoE modes always triggered at the start.
# At 606f457 LOWBIT_INT4_MOE_TRIGGER=AB set GEMM1's (A) and GEMM2's (B) position (0 at the start, the
# default then; 1 once a warp's first batch landed; 2 after the K loop); from the commit after 4ef577e
# GEMM1 is fixed at 0 and the variable is one digit, GEMM2's (default 1). CFGS names the settings
# (a name that is not a valid setting, e.g. "def", leaves the default). Alternated passes of
# `lowbit bench moe --path fused` on the small-expert models (the M <= 16 rows that miss 50% of the
# floor) and Mixtral.
# Stage: cmake --build build-marlin --target lowbit_cli; D=.dev/s55x; mkdir -p $D && strip -o $D/lowbit
# build-marlin/bin/lowbit && xz -T2 -f $D/lowbit; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session55_raw/gpu_moe_trigger.sh", carry=[".dev/s55x"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s55x}; S=$OUT/g; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
SH=${SHAPES:-qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,deepseek-v2-lite.tp2,qwen3.5-35b-a3b,mixtral-8x7b}
CFGS=${CFGS:-0 1 2}  # the 606f457 run: "00 10 20 01 02" (its two-digit form)
t0=$(date +%s)
b() { local name=$1; shift; env "$@" timeout 100 $B/lowbit bench moe --shapes $SH --m ${MS:-1,8,16} --path fused --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  for c in $CFGS; do b t${c}_$pass LOWBIT_INT4_MOE_TRIGGER=$c; done
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
  [ $(( $(date +%s) - t0 )) -gt ${BUDGET:-200} ] && break
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
(cd $OUT && tar czf moe_trigger.tgz g)
