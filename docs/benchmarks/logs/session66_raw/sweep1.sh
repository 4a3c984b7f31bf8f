#!/usr/bin/env bash
# Session 66, device call 1: block-shape sweep on the Llama-3-8B o / qkv projections (the dense rows under 50% of
# the floor on H100) and a plan check on the 70B qkv / tp4.qkv / o rows (card-to-card drift seen in session 65).
# Each group's table is in $OUT/<TAG>.tgz (table.md). BIN: the unpacked CLI folder.
# On an H200 (the card) the int4 GPU suite and the four tables run first (BIN must then also hold
# lowbit_tests_gpu_int4, as .dev/s64d does).
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  MODE=tests TEST_DIRS=$BIN bash docs/benchmarks/logs/session62_raw/gpu_round2.sh
  TOTAL=240 bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
fi
S=docs/benchmarks/logs/session65_raw/gpu_knobs.sh
R=LOWBIT_INT4_DECODE_ROWS16=0,LOWBIT_INT4_DECODE_WARPS; K=LOWBIT_INT4_DECODE_WARPS
ST="LOWBIT_INT4_DECODE_SPLITS"; TR="LOWBIT_INT4_DECODE_TRIGGER"
SHAPES=llama3-8b.o,llama3-8b.qkv MS=9,12,16 TAG=m16 CONFIGS="plan r8:LOWBIT_INT4_DECODE_ROWS16=0 r8w8s2t1:$R=8,$ST=2,$TR=1 r8w4s2t1:$R=4,$ST=2,$TR=1 r8w4s3t1:$R=4,$ST=3,$TR=1" bash $S | grep -v ^llama
SHAPES=llama3-8b.o,llama3-8b.qkv MS=1,8 TAG=m1 CONFIGS="plan w4s3t1:$K=4,$ST=3,$TR=1 w4s2t1:$K=4,$ST=2,$TR=1 w8s2t0:$K=8,$ST=2,$TR=0 w4s4t1:$K=4,$ST=4,$TR=1" bash $S | grep -v ^llama
SHAPES=llama3-70b.qkv,llama3-70b.tp4.qkv,llama3-70b.o MS=1,8 TAG=m70 CONFIGS="plan xe0:LOWBIT_INT4_DECODE_XEARLY=0 t0:$TR=0 t1:$TR=1 t2:$TR=2 s2:$ST=2" bash $S | grep -v ^llama
(cd $OUT && find . -type f ! -name '*.tgz' -delete && find . -type d -empty -delete; ls)
