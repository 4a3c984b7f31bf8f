#!/usr/bin/env bash
# Session 58: the MoE rows that miss 50% of the floor past M = 1 on the H200 (session 57: Qwen3-30B-A3B TP2 M = 8
# 42.7%, DeepSeek-V2-Lite TP2 M = 8 / 16 45.7 / 48.9%) under each measurement knob of the MoE decode plan, to see
# whether any plan the rules do not pick is faster there. bf16, --path fused, alternated passes until GUARD s.
# Table: session58_raw/knob_table.py on the k/ folder of moe_knobs.tgz (min over passes, time over the default's).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:?BIN=staged folder}; S=$OUT/k; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
SH=${SHAPES:-qwen3-30b-a3b.tp2,deepseek-v2-lite.tp2}
t0=$(date +%s)
b() { local name=$1; shift; env "$@" timeout 60 $B/lowbit bench moe --shapes $SH --m ${MS:-4,8,12,16} --dtype bf16 --path fused --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  b default_$pass
  b warps8_$pass LOWBIT_INT4_DECODE_WARPS=8
  b w13s8x1_$pass LOWBIT_INT4_MOE_W13_SHAPE=8:1
  b w13s4x2_$pass LOWBIT_INT4_MOE_W13_SHAPE=4:2
  b w13s8x2_$pass LOWBIT_INT4_MOE_W13_SHAPE=8:2
  b wide0_$pass LOWBIT_INT4_MOE_WIDE=0
  b wide2_$pass LOWBIT_INT4_MOE_WIDE=2
  b single0_$pass LOWBIT_INT4_MOE_SINGLE=0
  b trigger0_$pass LOWBIT_INT4_MOE_TRIGGER=0
  b trigger2_$pass LOWBIT_INT4_MOE_TRIGGER=2
  b early0_$pass LOWBIT_INT4_MOE_EARLY=0
  b ysum0_$pass LOWBIT_INT4_MOE_YSUM=0
  echo "knob pass $pass: $(( $(date +%s) - t0 )) s"
  [ $(( $(date +%s) - t0 )) -gt ${GUARD:-150} ] && break
done
grep -h "total #wrong" $S/*.log | sort | uniq -c
(cd $OUT && tar czf moe_knobs.tgz k)
