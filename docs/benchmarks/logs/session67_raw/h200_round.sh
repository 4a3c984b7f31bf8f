#!/usr/bin/env bash
# Session 67, device call: on an H200 (the card) the int4 GPU suite and the four tables with HEAD's
# GPU code (sessions 61-64 changed the decode plan after session 57, the last H200 tables). On any other card it
# stops at once (exit 3): the H100 rounds of sessions 65-66 already cover that card at this code.
# BIN: the unpacked folder holding the CLI (no Marlin) and lowbit_tests_gpu_int4 (.dev/s64d, c358dcd = HEAD's GPU
# code; the kernels' only later changes are comments).
# run(command="tar xJf .dev/s64d/s64d.tar.xz -C .dev/s64d && rm .dev/s64d/s64d.tar.xz; BIN=.dev/s64d bash docs/benchmarks/logs/session67_raw/h200_round.sh", carry=[".dev/s64d"], kind="nvidia-h200", timeout_s=580)
# The tracked tree (~56 MB) and .dev/s64d (8.0 MiB) exceed the 64 MiB a call carries: move
# docs/benchmarks/logs/session29_raw/TC/traces.tar.xz (3.2 MB) out of the working tree for the call, then back.
# (the tables took 50 s on session 57's H200; the whole call ~200 s). Files back: r2_tests, tables, ab61, m1.tgz
set -u
nvidia-smi -L
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing to do"; exit 3; }
MODE=tests TEST_DIRS=$BIN bash docs/benchmarks/logs/session62_raw/gpu_round2.sh
TOTAL=${TOTAL:-200} bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
# Then, as time allows, the plan changes of sessions 61-64 (measured on H100s only) against their knobs off on the
# eight dense projections: x two batches ahead at the wait (LOWBIT_INT4_DECODE_XEARLY=0 off) and the 8-row tiles at
# M = 9..16 on few groups (LOWBIT_INT4_DECODE_FEW8=0 off); then session 66's M = 1 / 8 block-shape group on 8B o /
# qkv (measured on an H100 only, where 8B o in 4-warp clusters of 3 was 0.974x the plan at M = 1, 1.066x at M = 8).
D8=llama3-8b.qkv,llama3-8b.o,llama3-8b.gate_up,llama3-8b.down,llama3-70b.qkv,llama3-70b.o,llama3-70b.gate_up,llama3-70b.down
SHAPES=$D8 MS=1,8,12,16 TAG=ab61 CONFIGS="plan xe0:LOWBIT_INT4_DECODE_XEARLY=0 few0:LOWBIT_INT4_DECODE_FEW8=0" \
  timeout 120 bash docs/benchmarks/logs/session65_raw/gpu_knobs.sh | grep -v ^llama
K=LOWBIT_INT4_DECODE_WARPS; ST=LOWBIT_INT4_DECODE_SPLITS; TR=LOWBIT_INT4_DECODE_TRIGGER
SHAPES=llama3-8b.o,llama3-8b.qkv MS=1,8 TAG=m1 CONFIGS="plan w4s3t1:$K=4,$ST=3,$TR=1 w4s2t1:$K=4,$ST=2,$TR=1 w8s2t0:$K=8,$ST=2,$TR=0" \
  timeout 90 bash docs/benchmarks/logs/session65_raw/gpu_knobs.sh | grep -v ^llama
# (The MoE decode knobs at M = 1 / 2 ran on an H100 in this session instead: moe_knobs_m1_h100.md, none faster than
# the plan by more than 3.0%; left out here to keep the call short.)
(cd $OUT && find . -type f ! -name '*.tgz' -delete; find . -type d -empty -delete; ls -la)
