#!/usr/bin/env bash
# Session 64: the M = 9..16 few-groups rule (rows16_few_groups_shape: two 8-row tiles per group in 8-warp clusters
# of 3 up to sms / 4 units, in 8-warp pairs up to 3/8 x sms units) as the plan (on) against
# LOWBIT_INT4_DECODE_FEW8=0 (off: the 16-row plan of before session 63) in the same CLI (.dev/s64p: built without
# vLLM's Marlin, stripped, xz, COMMIT). Shapes: clusters of 3 (512 / 1024 x 8192, 1024 x 6144), pairs (1024 x
# 4096, 70b.tp8.qkv, 1280 x 4096, 1536 x 8192 / 4096), and two it leaves (2048 x 8192, 8b.o: on = off there);
# M = 9 / 12 / 16; bf16 three alternated passes, fp16 two, per-channel and asymmetric bf16 two. On an H200 then
# the issue's four tables (session 51's gpu_tables.sh within TOTAL seconds; no Marlin column: the CLI is built without it).
# run(command="bash docs/benchmarks/logs/session64_raw/gpu_next.sh", carry=[".dev/s64p"])
# The GPU int4 suite of the same commit first, both binaries in one solid archive (.dev/s64c/s64c.tar.xz, xz -9e:
# 8.0 MiB where the two .xz files take 12.6 and the tracked tree 52.2 of the 64 MiB carry limit):
# run(command="tar xJf .dev/s64c/s64c.tar.xz -C .dev/s64c && rm .dev/s64c/s64c.tar.xz; MODE=tests TEST_DIRS=.dev/s64c
#   bash docs/benchmarks/logs/session62_raw/gpu_round2.sh; BIN=.dev/s64c bash docs/benchmarks/logs/session64_raw/gpu_next.sh",
#   carry=[".dev/s64c"])
# (or in two calls, .dev/s64t with the tests, .dev/s64p with the CLI; TABLES=0: no tables here, so that the caller
# can clear $OUT of all but the archives first: at most 8 files come back)
set -u
nvidia-smi -L
OUT0=$OUT
export BIN=${BIN:-.dev/s64p} OUT=$OUT/few8
source scripts/device/common.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0
for f in $BIN/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done
chmod +x $BIN/*
cat $BIN/COMMIT > $OUT/commit.txt; nvidia-smi -L > $OUT/gpu.txt
SH=${SH:-512x8192,1024x8192,1024x6144,1024x4096,llama3-70b.tp8.qkv,1280x4096,1536x8192,1536x4096,2048x8192,llama3-8b.o}
ab() {  # label pass bench-args...: the rule (e1) and FEW8=0 (e0)
  local l=$1 p=$2; shift 2
  step ${l}_e1_p$p 90 $BIN/lowbit bench gemm --shapes $SH --m 9,12,16 "$@" --reps 10 --cooldown-ms 100 --out $OUT/ab/${l}_e1_p$p > /dev/null
  step ${l}_e0_p$p 90 env LOWBIT_INT4_DECODE_FEW8=0 $BIN/lowbit bench gemm --shapes $SH --m 9,12,16 "$@" --reps 10 --cooldown-ms 100 \
    --out $OUT/ab/${l}_e0_p$p > /dev/null
}
mkdir -p $OUT/ab $OUT/abg
for p in 1 2 3; do ab bf16 $p --dtype bf16; [ $p -le 2 ] && ab fp16 $p --dtype fp16; done
for p in 1 2; do ab gpc $p --dtype bf16 --group -1; ab asym $p --dtype bf16 --asym; done
mv $OUT/ab/gpc_* $OUT/ab/asym_* $OUT/abg/
printf "$summary"
for d in ab abg; do
  env -u LD_LIBRARY_PATH python3 scripts/compare_bench.py $OUT/$d $OUT/rule_$d "Dense decode at M = 9 / 12 / 16 on few groups: session 64's 8-row rule as the plan (on) against LOWBIT_INT4_DECODE_FEW8=0 (off)" \
    > /dev/null 2>&1 || echo "compare $d failed"
  grep "^|" $OUT/rule_$d.md | head -100
done
grep -h "total #wrong" $OUT/*.log | sort | uniq -c
find $OUT -name '*_p*.png' -delete; (cd $OUT/.. && tar czf few8.tgz few8)
[ "${TABLES:-1}" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && \
  OUT=$OUT0 BIN=$BIN TOTAL=${TOTAL:-240} bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
exit 0
