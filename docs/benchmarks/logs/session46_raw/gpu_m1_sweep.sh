#!/usr/bin/env bash
# Session 46, for a later session (measurements only; .dev/s46c: the plain CLI built at the commit in
# COMMIT). The single-token MoE layer at M = 1 / 2, the worst rows (H200, moe.md of session 45:
# Qwen3-30B-A3B TP2 15.3%, Qwen3.5-35B-A3B 17.8%, DeepSeek-V2-Lite TP2 20.6%, Qwen3 TP1 26.1%,
# DeepSeek-V2-Lite 32.5% of the floor at M = 1), under the decode tile's knobs, none swept at M = 1
# since session 15: GEMM2's slot sum in a cluster up to topk 8 (LOWBIT_INT4_MOE_YSUM=2; session 15 lost
# 1-3 us with it on Qwen3) or never (0), GEMM2's wide mode off / always (WIDE=0 / 2), the block shape of
# both GEMMs forced (DECODE_WARPS x DECODE_SPLITS). Three alternated passes; the table script is
# session 45's single_table.py pattern (min over passes, time over the default's).
# Stage: cmake --build build --target lowbit_cli; D=.dev/s46c; mkdir -p $D && strip -o $D/lowbit build/bin/lowbit
# && xz -T2 -f $D/lowbit; git rev-parse HEAD > $D/COMMIT
# run(command="ONLY=H200 bash docs/benchmarks/logs/session46_raw/gpu_m1_sweep.sh", carry=[".dev/s46c"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s46c; S=$OUT/k; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $S/gpu.csv; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
SH=qwen3-30b-a3b.tp2,qwen3.5-35b-a3b,deepseek-v2-lite.tp2,qwen3-30b-a3b.tp1,deepseek-v2-lite
b() { local name=$1; shift; env "$@" timeout 50 $B/lowbit bench moe --shapes $SH --m 1,2 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  [ $(( $(date +%s) - t0 )) -gt 480 ] && { echo "out of time before pass $pass"; break; }
  b def_$pass
  b ysum2_$pass LOWBIT_INT4_MOE_YSUM=2
  b ysum0_$pass LOWBIT_INT4_MOE_YSUM=0
  b wide0_$pass LOWBIT_INT4_MOE_WIDE=0
  b wide2_$pass LOWBIT_INT4_MOE_WIDE=2
  for ws in 8:1 8:2 4:1 4:2; do b w${ws%:*}s${ws#*:}_$pass LOWBIT_INT4_DECODE_WARPS=${ws%:*} LOWBIT_INT4_DECODE_SPLITS=${ws#*:}; done
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf m1_sweep.tgz k && rm -rf k
