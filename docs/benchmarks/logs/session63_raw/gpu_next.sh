#!/usr/bin/env bash
# Staged by session 63 (not run): its M = 9..16 rule (unshared_decode_plan: two 8-row tiles per group in 8-warp
# split-K clusters of 3 on few groups and a long K) as the plan, against LOWBIT_INT4_DECODE_FEW8=0 (the 16-row
# plan of before) in the same binaries: the CLI of ff3a154 built without vLLM's Marlin (.dev/s63p: stripped, xz,
# COMMIT; the CLI with Marlin no longer fits the 64 MiB carry beside the tree). bf16 three alternated passes over
# the rule's weights and four it leaves, M = 9 / 12 / 16; fp16 two; then G = 32 / per-channel / asymmetric bf16
# two (G = 32 keeps its 8-row pairs: a control). On an H200 also session 61's A/Bs and the dense table.
# The GPU int4 suite with the rule's cases (1285 tests, binaries of ff3a154) goes first, in its own call:
# run(command="MODE=tests TEST_DIRS=.dev/s63u bash docs/benchmarks/logs/session62_raw/gpu_round2.sh", carry=[".dev/s63u"])
# run(command="bash docs/benchmarks/logs/session63_raw/gpu_next.sh", carry=[".dev/s63p"])
set -u
nvidia-smi -L
OUT0=$OUT
export BIN=${BIN:-.dev/s63p} OUT=$OUT/few8
source scripts/device/common.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0
for f in $BIN/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done
chmod +x $BIN/*
cat $BIN/COMMIT > $OUT/commit.txt; nvidia-smi -L > $OUT/gpu.txt
SH=256x8192,512x8192,1024x8192,1024x14336,1024x28672,llama3-70b.tp8.qkv,1536x8192,2048x8192,llama3-70b.tp4.qkv,llama3-8b.o
ab() {  # label pass bench-args...: the rule (e1) and FEW8=0 (e0)
  local l=$1 p=$2; shift 2
  step ${l}_e1_p$p 90 $BIN/lowbit bench gemm --shapes $SH --m 9,12,16 "$@" --reps 10 --cooldown-ms 100 --out $OUT/ab/${l}_e1_p$p > /dev/null
  step ${l}_e0_p$p 90 env LOWBIT_INT4_DECODE_FEW8=0 $BIN/lowbit bench gemm --shapes $SH --m 9,12,16 "$@" --reps 10 --cooldown-ms 100 \
    --out $OUT/ab/${l}_e0_p$p > /dev/null
}
mkdir -p $OUT/ab $OUT/abg
for p in 1 2 3; do ab bf16 $p --dtype bf16; [ $p -le 2 ] && ab fp16 $p --dtype fp16; done
for p in 1 2; do ab g32 $p --dtype bf16 --group 32; ab gpc $p --dtype bf16 --group -1; ab asym $p --dtype bf16 --asym; done
mv $OUT/ab/g32_* $OUT/ab/gpc_* $OUT/ab/asym_* $OUT/abg/
printf "$summary"
for d in ab abg; do
  env -u LD_LIBRARY_PATH python3 scripts/compare_bench.py $OUT/$d $OUT/rule_$d "Dense decode at M = 9 / 12 / 16: session 63's few-groups rule as the plan (on) against LOWBIT_INT4_DECODE_FEW8=0 (off)" \
    > /dev/null 2>&1 || echo "compare $d failed"
  grep "^|" $OUT/rule_$d.md | head -100
done
find $OUT -name '*_p*.png' -delete; (cd $OUT/.. && tar czf few8.tgz few8)
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && \
  OUT=$OUT0 BIN=$BIN GEMM_S=${GEMM_S:-150} bash docs/benchmarks/logs/session61_raw/gpu_h200.sh
exit 0
