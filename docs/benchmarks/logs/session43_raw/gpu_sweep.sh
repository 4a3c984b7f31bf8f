#!/usr/bin/env bash
# Session 43 (measurements only, no code change): the decode plan's warps x split-K cluster size
# against its own choice on the dense rows that miss the M <= 16 targets (8b.qkv, 8b.o, 8b.down,
# 70b.o), M = 1 / 8 / 16, bf16 G = 128, --path skinny; the default run first and last, each forced
# pair once (LOWBIT_INT4_DECODE_WARPS / _SPLITS, decode_tile.cuh), then the PDL trigger points.
# run(command="bash docs/benchmarks/logs/session43_raw/gpu_sweep.sh", carry=[".dev/s43h"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/s; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader > $R/gpu.txt 2>&1; cat $R/gpu.txt
for f in .dev/s43h/*.xz; do [ -e "$f" ] && xz -d -T8 "$f"; done; chmod +x .dev/s43h/*
SH=llama3-8b.qkv,llama3-8b.o,llama3-8b.down,llama3-70b.o
b() { timeout 40 .dev/s43h/lowbit bench gemm --shapes $SH --m 1,8,16 --path skinny --reps 5 --cooldown-ms 100 --out $R/$1 > $R/$1.log 2>&1 || echo "$1 rc $?"; }
t0=$(date +%s)
b def0
for w in 4 8; do for s in 1 2 3 4 6 8; do LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$s b w${w}s$s; done; done
for t in 0 1 2; do LOWBIT_INT4_DECODE_TRIGGER=$t b trig$t; done
b def1
echo "done in $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf sweep.tgz s
