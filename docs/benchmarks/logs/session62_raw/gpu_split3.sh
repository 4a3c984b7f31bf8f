#!/usr/bin/env bash
# Session 62: the 8-row tile's block shape on the few-unit shapes at M <= 8 (8b.o: 64 column groups, the plan's
# 8-warp pairs) against 4- and 8-warp blocks in split-K clusters of 3 / 4 with the next launch started after the
# first batches (session 61's first knob sweep, before x_early, had 4 x 3 with that trigger at 0.93x / 0.95x the
# plan on 8b.o M = 1 / 8). Three alternated passes, HEAD's CLI (BIN, default .dev/s62x), bf16 then fp16.
# run(command="bash docs/benchmarks/logs/session62_raw/gpu_split3.sh", carry=[".dev/s62x"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s62x}; H=$OUT/split3; mkdir -p $H
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $H/commit.txt 2>/dev/null; nvidia-smi -L > $H/gpu.txt
SH=${SHAPES:-llama3-8b.o,llama3-8b.down,llama3-70b.o,llama3-70b.down,llama3-70b.tp2.o,llama3-70b.tp4.o,llama3-70b.tp8.o,llama3-70b.tp8.qkv}
one() {  # label dtype env...
  local l=$1 d=$2; shift 2
  env "$@" timeout 90 $B/lowbit bench gemm --shapes $SH --m ${MS:-1,4,8} --dtype $d --reps 10 --cooldown-ms 100 \
    --out $H/${l}_${d}_p$pass > $H/${l}_${d}_p$pass.log 2>&1 || echo "$l $d pass $pass rc $?"
}
for d in bf16 fp16; do
  for pass in 1 2 3; do
    one plan $d
    one w4s3t1 $d LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=3 LOWBIT_INT4_DECODE_TRIGGER=1
    one w8s3t1 $d LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=3 LOWBIT_INT4_DECODE_TRIGGER=1
    one w8s3t0 $d LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=3 LOWBIT_INT4_DECODE_TRIGGER=0
    one w8s4t1 $d LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=4 LOWBIT_INT4_DECODE_TRIGGER=1
  done
done
for f in $H/*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
done | sort -k2,3 > $H/summary.txt
python3 - $H/summary.txt <<'PY'
import sys, collections
best = collections.defaultdict(lambda: 1e9)
for line in open(sys.argv[1]):
    f = line.split()
    label, dt = f[0].rsplit('_', 2)[0], f[0].rsplit('_', 2)[1]
    best[(f[1], f[2], dt, label)] = min(best[(f[1], f[2], dt, label)], float(f[3]))
    if f[-1] != 'wrong=0': print('WRONG', line.strip())
keys = sorted({k[:3] for k in best})
labels = ['plan', 'w4s3t1', 'w8s3t1', 'w8s3t0', 'w8s4t1']
print('| shape | M | dtype | ' + ' | '.join(labels) + ' |')
for k in keys:
    p = best[k + ('plan',)]
    print('| %s | %s | %s | ' % k + ' | '.join('%.2f (%.3fx)' % (best[k + (l,)], best[k + (l,)] / p) for l in labels) + ' |')
PY
(cd $OUT && tar czf split3.tgz split3)
