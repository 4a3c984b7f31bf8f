#!/usr/bin/env bash
# Session 69 (no device lent; staged): the dense 8-row decode tile in 16-warp blocks (kRows8W16 in
# kernels/int4/decode_tile.cuh, only under LOWBIT_INT4_DECODE_WARPS=16, windows of 8: G = 128 / per-channel).
# Hypothesis: on 8B o (64 groups, K = 4096, 8-warp pairs, one block per SM) the K loop after the wait is bound by MMA
# issue with two warps per scheduler (12.8 cycles per MMA; 7.2 with four, session 62's mma_chain probe); 16 warps give
# each warp 8 K steps instead of 16 at four warps per scheduler: ~0.45 us less per launch if the probe's step costs
# hold (6.0 us on the H200, 6.4 on an H100). Any card:
#  1. the dense decode GEMM cases with the knob (kRows8 cases at windows of 8 run 16 warps; the rest fall back to 8):
#     against the fp64 reference, bit-identical reruns;
#  2. the A/B at M = 1 / 4 / 8: the plan against 16 warps at the plan's split, alone (splits 1) and with the next
#     launch at the start (trigger 0), min of 2 alternated passes, on the projections whose 16-warp blocks fit one
#     wave (one block per SM): 8B o and 8B down at the plan's pairs (64 groups), 8B qkv (96) and 70B o (128) alone.
#     A 16-warp block fills the SM's registers, so the next launch cannot start beside it: that may cost what the
#     shorter K loop saves.
# B / BIN: the unpacked folder with the CLI (no Marlin) and lowbit_tests_gpu_int4 (.dev/s69).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s69}; V=$OUT/w16; mkdir -p $V; chmod +x $B/*
nvidia-smi -L | tee $V/gpu.txt; cat $B/COMMIT | tee $V/commit.txt
t0=$(date +%s)
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  LOWBIT_INT4_DECODE_WARPS=16 timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 \
    --gtest_filter='*/Int4Gemm.*:Int4GemmDecodePush.*' > $V/tests_w16.log 2>&1
  echo "== w16 dense decode cases rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $V/tests_w16.log | head -12
fi
K=LOWBIT_INT4_DECODE_WARPS=16
BIN=$B SHAPES=llama3-8b.o,llama3-8b.down,llama3-8b.qkv,llama3-70b.o \
  MS=1,4,8 TAG=w16ab CONFIGS="plan w16:$K w16s1:$K,LOWBIT_INT4_DECODE_SPLITS=1 w16t0:$K,LOWBIT_INT4_DECODE_TRIGGER=0" \
  timeout 200 bash docs/benchmarks/logs/session65_raw/gpu_knobs.sh | grep -v ^llama
echo "[$(( $(date +%s) - t0 )) s]"
(cd $OUT && tar czf w16.tgz w16 && rm -rf w16)
