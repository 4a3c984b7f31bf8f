#!/usr/bin/env bash
# Session 61: on an H200 only (exit 3 on any other card), with the CLI of a683b30's code (.dev/s61w, vLLM's Marlin
# built in): this session's three plan changes against their previous choices in the same binaries, two
# alternated passes each (x_early: LOWBIT_INT4_DECODE_XEARLY=0; 8b.qkv pairs: LOWBIT_INT4_DECODE_WARPS=8
# LOWBIT_INT4_DECODE_SPLITS=1; staged x: LOWBIT_INT4_DECODE_XW=0), then the dense table (bench gemm, every
# shape and M, as gemm.md), within what is left of the session's device time.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_h200.sh", carry=[".dev/s61w"], kind="nvidia-h200")
# (BIN: another CLI folder; session 62 runs it with HEAD's CLI, docs/benchmarks/logs/session62_raw/gpu_round2.sh.)
set -u
nvidia-smi -L; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: stopped"; exit 3; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s61w}; H=$OUT/h; mkdir -p $H
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $H/commit.txt
ab() {  # name, shapes, M list, env of "off"
  local name=$1 sh=$2 m=$3; shift 3
  for pass in 1 2; do
    timeout 60 $B/lowbit bench gemm --shapes $sh --m $m --dtype bf16 --reps 10 --cooldown-ms 100 --out $H/${name}_e1_p$pass > $H/${name}_e1_p$pass.log 2>&1
    env "$@" timeout 60 $B/lowbit bench gemm --shapes $sh --m $m --dtype bf16 --reps 10 --cooldown-ms 100 --out $H/${name}_e0_p$pass > $H/${name}_e0_p$pass.log 2>&1
  done
}
ab xearly llama3-8b.o,llama3-8b.down,llama3-70b.o,llama3-70b.qkv 1,8 LOWBIT_INT4_DECODE_XEARLY=0
ab qkv llama3-8b.qkv 1,2,4,8 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1
ab staged llama3-8b.down,llama3-70b.o,llama3-70b.tp4.down 9,12,16 LOWBIT_INT4_DECODE_XW=0
for f in $H/*_e*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
done | sort -k2,3 | tee $H/summary.txt | awk '{print}' | tail -60
(cd $OUT && tar czf h200_ab.tgz h)
timeout ${GEMM_S:-150} $B/lowbit bench gemm --cooldown-ms 300 --out $H/gemm > $H/gemm.log 2>&1; echo "gemm rc $?"; grep -h "total #wrong" $H/gemm.log
(cd $OUT && tar czf h200_ab.tgz h)
