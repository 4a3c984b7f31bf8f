#!/usr/bin/env bash
# INT4 component on the H200 machine (uses GPU 0 only): GPU tests (dequant bit-exact, GEMM
# vs fp64, MoE routing/align exact, fused MoE vs reference, argument checks), then
# `lowbit bench gemm` (Llama-3 8B/70B projections, M = 1,8,16,32,128,512,2048,8192, ~15 s) and
# `lowbit bench moe` (Qwen3-30B-A3B TP1/TP2, Mixtral-8x7B, DeepSeek-V2-Lite, same M set), the
# batched-decode paths side by side (bench_gemm_medium), then the prefill paths/schedules side
# by side (bench_prefill_paths).
# QUICK=1: the benches' --quick subsets (M = 1,16,256,4096 dense; 1,16,128,2048 MoE).
# Env: BIN (built binaries), OUT (results). Budget: the step limits below (under 7 minutes until
# session 18; the pipelined-tile steps of session 25 add about a minute).
set -uo pipefail
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
source "$(dirname "$0")/common.sh"
quick=()
[ "${QUICK:-0}" = 1 ] && quick=(--quick)
step gpu_int4_tests 120 "$BIN/lowbit_tests_gpu_int4" --gtest_brief=1
# Every M = 9..16 decode case on the block-shared x tiles (the plan takes them for some grids).
step gpu_int4_xshared 60 env LOWBIT_INT4_DECODE_XSHARED=2 "$BIN/lowbit_tests_gpu_int4" --gtest_brief=1 \
  --gtest_filter='Forced/Int4Gemm*'
# The pipelined kernel with every tile on mma.sync (LOWBIT_INT4_PIPE_WGMMA=0; by default its
# 32- to 128-row tiles run on wgmma): its forced cases and the MoE cases.
step gpu_int4_pipe_mma 60 env LOWBIT_INT4_PIPE_WGMMA=0 "$BIN/lowbit_tests_gpu_int4" --gtest_brief=1 \
  --gtest_filter='Forced/Int4Gemm*pipelined*:Forced/*M100_N8192*:*Moe*'
# The pipelined kernel's wgmma tiles of session 25 on every forced pipelined case: 48- and 96-row
# tiles forced (LOWBIT_INT4_PIPE_ROWS; by default M = 33..48 on large weights / 65..96), and the
# 32-row tile back on mma.sync (LOWBIT_INT4_PIPE_WG32=0) with the MoE cases that use it.
step gpu_int4_pipe_rows 90 bash -c 'LOWBIT_INT4_PIPE_ROWS=48 "$0" --gtest_brief=1 --gtest_filter="Forced/Int4Gemm*pipelined*" &&
  LOWBIT_INT4_PIPE_ROWS=96 "$0" --gtest_brief=1 --gtest_filter="Forced/Int4Gemm*pipelined*" &&
  LOWBIT_INT4_PIPE_WG32=0 "$0" --gtest_brief=1 --gtest_filter="Forced/Int4Gemm*pipelined*:Pipelined/*"' \
  "$BIN/lowbit_tests_gpu_int4"
# The MoE cases with the decode tile at every block size (LOWBIT_INT4_MOE_PIPE=0; by default
# the pipelined tile takes align blocks of 16..128 rows).
step gpu_int4_moe_decode 40 env LOWBIT_INT4_MOE_PIPE=0 "$BIN/lowbit_tests_gpu_int4" --gtest_brief=1 --gtest_filter='*Moe*'
# The single-token GEMM2's slot sum in a cluster at every topk up to 8, and never (by default up
# to topk 6; kernels/int4/moe_decode.cu).
step gpu_int4_moe_ysum 40 bash -c 'LOWBIT_INT4_MOE_YSUM=2 "$0" --gtest_brief=1 --gtest_filter="*Moe*" &&
  LOWBIT_INT4_MOE_YSUM=0 "$0" --gtest_brief=1 --gtest_filter="*Moe*"' "$BIN/lowbit_tests_gpu_int4"
# Split-K clusters with rank 0 loading the other ranks' sums (LOWBIT_INT4_DECODE_PUSH=0; by
# default they push them): the dense decode and MoE cases.
step gpu_int4_push_off 120 env LOWBIT_INT4_DECODE_PUSH=0 "$BIN/lowbit_tests_gpu_int4" --gtest_brief=1 \
  --gtest_filter='*/Int4Gemm.*:*Moe*'
# A CLI built with -DLOWBIT_BENCH_VLLM_MARLIN=ON adds vLLM's Marlin (dense) and fused_marlin_moe
# (MoE) beside lowbit's kernels in these two benches (marlin_us / mgemm_us / mlayer_us columns).
step bench_gemm 55 "$BIN/lowbit" bench gemm ${quick[@]+"${quick[@]}"} --out "$OUT/gemm"
step bench_moe 60 "$BIN/lowbit" bench moe ${quick[@]+"${quick[@]}"} --out "$OUT/moe"
# Batched decode / short prefill on the MMA-tiled layout: kAuto next to each path forced (the
# decode kernel, the pipelined kernel, dequant + cuBLAS), M = 24..512 (tiled_auto_path), and the
# pipelined kernel on mma.sync only (LOWBIT_INT4_PIPE_WGMMA=0) in the same round.
step bench_gemm_medium 60 bash -c '"$0" bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto \
  --path auto,skinny,pipelined,cublas --reps 5 --out "$1/gemm_medium";
  LOWBIT_INT4_PIPE_WGMMA=0 "$0" bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto \
  --path pipelined --reps 5 --out "$1/gemm_medium_mma"' "$BIN/lowbit" "$OUT"
# Dense decode: the MMA-tiled decode kernel (default layout) next to the N-packed kernel on
# the same weights (--layout npacked), M = 1..32.
step bench_gemm_layouts 40 "$BIN/lowbit" bench gemm --m 1,8,16,32 --layout auto,npacked --path skinny --out "$OUT/gemm_layouts"
# MoE: the default expert layout (MMA-tiled: the decode kernel's MoE modes) next to the
# N-packed skinny tile on the same weights, M = 1..32.
step bench_moe_layouts 40 "$BIN/lowbit" bench moe --m 1,8,16,32 --layout npacked --out "$OUT/moe_npacked"
# Prefill schedules that are off by default until measured: dense dequant + cuBLAS without /
# with the overlapped dequantization (LOWBIT_INT4_OVERLAP=1; skinny for reference up to 512),
# grouped MoE on 1 vs 4 worker streams (LOWBIT_INT4_MOE_STREAMS=4; fused for reference).
step bench_prefill_paths 70 bash -c '"$0" bench gemm --m 512,2048,4096 --path cublas,skinny --reps 5 --out "$1/prefill_seq";
  LOWBIT_INT4_OVERLAP=1 "$0" bench gemm --m 512,2048,4096 --path cublas --reps 5 --out "$1/prefill_overlap";
  "$0" bench moe --m 512,2048,8192 --path fused,grouped --reps 3 --out "$1/moe_paths";
  LOWBIT_INT4_MOE_STREAMS=4 "$0" bench moe --m 512,2048,8192 --path grouped --reps 3 --out "$1/moe_grouped4"' \
  "$BIN/lowbit" "$OUT"
# The decode tables (bf16, fp16) and switches off in the same round: the 4-warp 16-row tiles'
# half-batch x prefetch (LOWBIT_INT4_DECODE_XPREFETCH=0; the other tiles always load x a batch
# ahead since session 19), MoE GEMM2's wide mode (LOWBIT_INT4_MOE_WIDE=0), the MoE
# pipelined tile (LOWBIT_INT4_MOE_PIPE=0, every M of bench moe) and the block-shared x tiles at
# M = 9..16 (LOWBIT_INT4_DECODE_XSHARED=0); ~50 s together.
step bench_decode 80 bash -c '"$0" bench gemm --m 1,8,12,16 --layout auto --path skinny --out "$1/gemm_decode";
  "$0" bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out "$1/gemm_decode_fp16";
  LOWBIT_INT4_DECODE_XPREFETCH=0 "$0" bench gemm --m 1,8,12,16 --layout auto --path skinny --out "$1/gemm_decode_xoff";
  LOWBIT_INT4_MOE_WIDE=0 "$0" bench moe --m 1,8,16,32,128 --out "$1/moe_wide_off";
  LOWBIT_INT4_MOE_PIPE=0 "$0" bench moe --out "$1/moe_pipe_off";
  LOWBIT_INT4_DECODE_XSHARED=0 "$0" bench gemm --m 9,12,16 --layout auto --path skinny --out "$1/gemm_decode_unshared"' \
  "$BIN/lowbit" "$OUT"
# SASS facts of the int4 kernels (tensor-core and LOP3 use, local-memory traffic).
if command -v cuobjdump > /dev/null; then
  sass=$(mktemp /tmp/int4-sass.XXXX)
  cuobjdump --dump-sass "$BIN/lowbit_tests_gpu_int4" > "$sass" 2>&1
  for k in gemm_tc_kernel gemm_skinny_tc_kernel gemm_decode_kernel gemm_pipelined_kernel kern16skinny_tc_kernel; do  # the last: decode tile (MoE)
    awk -v k="$k" '/Function :/ {on = index($0, k) > 0} on' "$sass" > "$sass.k"
    echo "sass $k: HMMA=$(grep -c HMMA "$sass.k") LOP3=$(grep -c LOP3 "$sass.k") LDL/STL=$(grep -cE 'LDL|STL' "$sass.k")"
  done | tee "$OUT/sass_summary.txt"
  awk '/Function :/ {on = index($0, "gemm_tc_kernel") > 0} on' "$sass" | head -3000 > "$OUT/sass_gemm_tc.txt"
  rm -f "$sass" "$sass.k"
fi
echo "=== int4 summary ==="
printf "$summary"
grep -E "PASSED|FAILED" "$OUT/gpu_int4_tests.log" "$OUT/gpu_int4_xshared.log" "$OUT/gpu_int4_pipe_mma.log" \
  "$OUT/gpu_int4_moe_decode.log" "$OUT/gpu_int4_push_off.log" | tail -14
for f in gemm moe gemm_medium gemm_medium_mma gemm_layouts moe_npacked prefill_seq prefill_overlap moe_paths moe_grouped4 gemm_decode gemm_decode_fp16 gemm_decode_xoff moe_wide_off moe_pipe_off gemm_decode_unshared; do [ -f "$OUT/$f.md" ] && { echo "--- $f"; cat "$OUT/$f.md"; }; done
grep -h "total #wrong" "$OUT"/bench_*.log
cat "$OUT/sass_summary.txt" 2>/dev/null
