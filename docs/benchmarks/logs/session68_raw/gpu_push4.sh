#!/usr/bin/env bash
# Session 68: 8-warp 8-row decode blocks in split-K clusters of 4 whose ranks push their sums (three receive slots in
# rank 0, branch exp/push4; before it only clusters of up to 3 pushed and rank 0 of a cluster of 4 loaded the other
# ranks' sums: session 62 measured those clusters on 8b.o at 1.00-1.09x the plan, and the push is worth 1.0-1.6 us on
# the pairs). Any card:
#  1. the dense decode GEMM cases forced into 8-warp clusters of 4 (the push against remote loads bit for bit, and
#     against the fp64 reference);
#  2. the A/B: the plan against 8-warp clusters of 4 (trigger after the first batches / at the start / push off) on the
#     shapes with at most 66 column groups (two blocks per SM hold all four ranks), min of 2 alternated passes.
# On an H200 then also the whole int4 GPU suite and the four tables (the plan is main's: the branch changes
# only the slots, so main's default path runs unchanged).
# BIN: the unpacked folder with the CLI (no Marlin) and lowbit_tests_gpu_int4 of exp/push4 (.dev/s68p).
# run(command="tar xJf .dev/s68p/s68p.tar.xz -C .dev/s68p && rm .dev/s68p/s68p.tar.xz; BIN=.dev/s68p bash docs/benchmarks/logs/session68_raw/gpu_push4.sh", carry=[".dev/s68p"], timeout_s=560)
# The second sweep (the same machine, right after; results_h100_ab2.tar.xz) ran gpu_knobs.sh alone on sixteen more
# weights at M = 1 / 8: K=LOWBIT_INT4_DECODE_WARPS=8,LOWBIT_INT4_DECODE_SPLITS=4; BIN=.dev/s68p
# SHAPES=512x8192,1024x4096,1024x6144,1024x14336,1536x8192,2048x6144,2048x14336,2560x4096,2560x6144,2816x14336,3072x8192,3584x8192,3584x14336,4096x8192,4096x6144,1280x8192
# MS=1,8 TAG=ab2 CONFIGS="plan w8s4t1:$K,LOWBIT_INT4_DECODE_TRIGGER=1 w8s4t0:$K,LOWBIT_INT4_DECODE_TRIGGER=0"
# timeout 200 bash docs/benchmarks/logs/session65_raw/gpu_knobs.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s68p}; V=$OUT/p4; mkdir -p $V; chmod +x $B/*
nvidia-smi -L | tee $V/gpu.txt; cat $B/COMMIT | tee $V/commit.txt
t0=$(date +%s)
LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=4 timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 \
  --gtest_filter='*/Int4Gemm.*:Int4GemmDecodePush.*' > $V/tests_w8s4.log 2>&1
echo "== w8s4 dense decode cases rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $V/tests_w8s4.log | head -12
K=LOWBIT_INT4_DECODE_WARPS=8,LOWBIT_INT4_DECODE_SPLITS=4
SHAPES=llama3-8b.o,llama3-8b.down,llama3-70b.tp8.qkv,llama3-70b.tp4.qkv,1024x8192,2048x8192,2816x8192,2048x4096 \
  MS=1,4,8 TAG=ab CONFIGS="plan w8s4t1:$K,LOWBIT_INT4_DECODE_TRIGGER=1 w8s4t0:$K,LOWBIT_INT4_DECODE_TRIGGER=0 w8s4p0:$K,LOWBIT_INT4_DECODE_TRIGGER=1,LOWBIT_INT4_DECODE_PUSH=0" \
  timeout 200 bash docs/benchmarks/logs/session65_raw/gpu_knobs.sh | grep -v ^llama
echo "[$(( $(date +%s) - t0 )) s]"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
MODE=tests TEST_DIRS=$B bash docs/benchmarks/logs/session62_raw/gpu_round2.sh
TOTAL=${TOTAL:-200} BIN=$B bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
(cd $OUT && find . -type f ! -name '*.tgz' -delete; find . -type d -empty -delete; ls -la)
