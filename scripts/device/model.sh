#!/usr/bin/env bash
# Model component on the 2x H200 machine: GPU op tests, TP runner tests (1 and 2 GPUs),
# then the TTFT benchmark (Llama-3-8B full depth at batch 8 and 32, Llama-3-70B 16 of 80
# layers timed and scaled, Qwen3-30B-A3B with int4 MoE experts 2 of 48 layers timed and scaled).
# Env: BIN (built binaries), OUT (results). QUICK=1: batch 8 only. Budget: under 4 minutes
# (measured 2026-11-30: tests ~10 s, bench ~100 s: Llama ~80 s, Qwen 14 s; the three generate
# runs added 2026-12-01 take a few seconds each).
set -uo pipefail
STEP_TAIL=25
source "$(dirname "$0")/common.sh"
step gpu_model_tests 40 "$BIN/lowbit_tests_gpu_model"
step multigpu_model_tests 60 "$BIN/lowbit_tests_multigpu_model"
# generate --device gpu at 37 + 64 = 101 positions (the old "Known defect" shape), CPU for comparison.
if [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  step generate_gpu 60 "$BIN/lowbit" generate --chat --prompt "What is the capital of France?" --device gpu
  step generate_gpu_tp2 60 "$BIN/lowbit" generate --chat --prompt "What is the capital of France?" --device gpu --tp 2
  step generate_cpu 60 "$BIN/lowbit" generate --chat --prompt "What is the capital of France?"
fi
batches=8,32
[ "${QUICK:-0}" = 1 ] && batches=8
step bench_ttft 130 "$BIN/lowbit" bench ttft --batch "$batches" --out "$OUT/ttft"
echo "=== model summary ==="
printf "$summary"
[ -f "$OUT/ttft.md" ] && cat "$OUT/ttft.md"
for g in generate_gpu generate_gpu_tp2 generate_cpu; do [ -f "$OUT/$g.log" ] && { echo "--- $g"; cat "$OUT/$g.log"; }; done
grep -h "positions: max\|vs fp64\|vs tp1\|ppl tp\|graphed\|moe tp2" "$OUT/gpu_model_tests.log" "$OUT/multigpu_model_tests.log" 2>/dev/null | head -24
