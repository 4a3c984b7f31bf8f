#!/usr/bin/env bash
# Staged by session 62 for the next device calls (HEAD's CLI with vLLM's Marlin in .dev/s62x; rebuild it first:
# cmake -S . -B build-marlin -DCMAKE_BUILD_TYPE=Release -DLOWBIT_BENCH_VLLM_MARLIN=ON && cmake --build build-marlin
# --target lowbit_cli -j2, then strip, xz, and COMMIT as in session 62). Ran in session 63 on an H100 with BIN=.dev/s63c
# (the CLI of 83e6009 without Marlin: the one with Marlin, 9.7 MiB, no longer fits the 64 MiB carry beside the tree);
# results in docs/int4-kernels-sessions.md, "Session 63", and docs/benchmarks/gemm_rows8_m16_h100.md.
#  1. The clusters-of-3 idea at M = 9..16, where few groups on a long K still run 8-warp 16-row pairs (70b.tp8.qkv:
#     40 blocks on 132 SMs) and the 16-row tiles have one push slot (decode_push_peers): two 8-row tiles per group in
#     clusters of 3 (LOWBIT_INT4_DECODE_ROWS16=0 with 8 warps x 3, whose 8-row tiles push into two slots) against the
#     plan, bf16 three passes; then fp16 two.
#  2. On an H200 only: session 61's A/B of its three plan changes and the issue's dense table with this CLI.
# run(command="bash docs/benchmarks/logs/session62_raw/gpu_next.sh", carry=[".dev/s62r"], kind="nvidia-h200")
# (session 63: BIN defaults to .dev/s62r, the CLI of 76b2a2c, whose kernels are HEAD's; .dev/s62x predates the rule)
# The int4 GPU tests (the column-sampling mend of 05fd0a8 is unrun on a GPU) go in their own call (carry limit):
# run(command="MODE=tests TEST_DIRS=.dev/s62t bash docs/benchmarks/logs/session62_raw/gpu_round2.sh", carry=[".dev/s62t"])
D=docs/benchmarks/logs/session62_raw
# Session 63: on an H200, the issue's card, session 61's A/Bs and the dense table come first (the sweeps below are
# H100-sized questions); elsewhere the sweeps alone.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  BIN=${BIN:-.dev/s62r} GEMM_S=${GEMM_S:-150} bash $D/../session61_raw/gpu_h200.sh
  [ "${SWEEPS_ON_H200:-0}" = 1 ] || exit 0
fi
S=llama3-70b.tp8.qkv,llama3-70b.tp4.qkv,1024x8192,2048x8192,1024x14336,llama3-8b.o
SHAPES=$S MS=9,12,16 CONFIGS="plan r8plan r8w8s3t1 r8w8s2t1" TAG=m16_bf16 BIN=${BIN:-.dev/s62r} bash $D/gpu_split3.sh 2>&1 | tail -22
SHAPES=$S MS=9,12,16 CONFIGS="plan r8w8s3t1" DTYPES=fp16 PASSES=2 TAG=m16_fp16 BIN=${BIN:-.dev/s62r} bash $D/gpu_split3.sh 2>&1 | tail -22
# Session 63: the clusters-of-3 rule at the M it was not timed at (measured at 1 / 4 / 8): the plan against the pairs.
SHAPES=llama3-70b.tp8.qkv,llama3-70b.tp4.qkv,1024x8192,1024x14336 MS=2,3,5,6,7 CONFIGS="plan w8s2t1" PASSES=2 TAG=mid_bf16 BIN=${BIN:-.dev/s62r} bash $D/gpu_split3.sh 2>&1 | tail -22
exit 0
