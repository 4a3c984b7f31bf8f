#!/usr/bin/env bash
# Session 68, device call: on an H200 (the card) the int4 GPU suite and the four tables at HEAD's GPU
# code (945f721: sessions 61-64's plan changes and session 68's clusters of 4, all measured on H100s only), then the
# clusters-of-4 rule against LOWBIT_INT4_DECODE_C4=0 on this card (bf16 / fp16 G = 128, min of 2 alternated passes).
# On any other card it stops at once (exit 3): session 68's H100 call (gpu_c4.sh) ran the suite and the A/B there.
# BIN: the unpacked folder with the CLI (no Marlin) and lowbit_tests_gpu_int4 of 945f721 (.dev/s68c, one tar | xz archive).
# run(command="tar xJf .dev/s68c/s68c.tar.xz -C .dev/s68c && rm .dev/s68c/s68c.tar.xz; BIN=.dev/s68c bash docs/benchmarks/logs/session68_raw/h200_round.sh", carry=[".dev/s68c"], kind="nvidia-h200", timeout_s=560)
# The tracked tree (~56 MB) and the 8.0 MiB archive exceed the 64 MiB a call carries: move
# docs/benchmarks/logs/session29_raw/TC/traces.tar.xz (3.2 MB) out of the working tree for the call, then back.
set -u
nvidia-smi -L
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing to do"; exit 3; }
MODE=tests TEST_DIRS=$BIN bash docs/benchmarks/logs/session62_raw/gpu_round2.sh
TOTAL=${TOTAL:-220} bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
V=$OUT/c4h; mkdir -p $V/ab
B=$BIN D=$V/ab TMO=60; source docs/benchmarks/logs/session68_raw/ab_c4.sh  # SH and ab(), as gpu_c4.sh runs them
for p in 1 2; do for d in bf16 fp16; do ab $d $p --dtype $d; done; done
python3 scripts/compare_bench.py $V/ab $V/rule "8-warp clusters of 4 (rule) vs LOWBIT_INT4_DECODE_C4=0" > /dev/null 2>&1 || echo "compare failed"
grep "^|" $V/rule.md | head -90; find $V/ab -name '*_p*.png' -delete; (cd $OUT && tar czf c4h.tgz c4h && rm -rf c4h)
# The 64-group weights that the rule leaves (8b.o, 8b.down) forced into 8-warp clusters of 4 (on the H100 0.94-1.09x the plan).
K=LOWBIT_INT4_DECODE_WARPS=8,LOWBIT_INT4_DECODE_SPLITS=4
SHAPES=llama3-8b.o,llama3-8b.down MS=1,8 TAG=k64 CONFIGS="plan w8s4t1:$K,LOWBIT_INT4_DECODE_TRIGGER=1 w8s4t0:$K,LOWBIT_INT4_DECODE_TRIGGER=0" \
  timeout 60 bash docs/benchmarks/logs/session65_raw/gpu_knobs.sh | grep -v ^llama
(cd $OUT && find . -type f ! -name '*.tgz' -delete; find . -type d -empty -delete; ls -la)
