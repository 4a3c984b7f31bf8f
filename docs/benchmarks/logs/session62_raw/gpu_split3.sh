#!/usr/bin/env bash
# Session 62: the 8-row tile's block shape on the few-unit shapes at M <= 8 (8b.o: 64 column groups, the plan's
# 8-warp pairs) against 4- and 8-warp blocks in split-K clusters of 3 / 4 with the next launch started after the
# first batches (session 61's first knob sweep, before x_early, had 4 x 3 with that trigger at 0.93x / 0.95x the
# plan on 8b.o M = 1 / 8). PASSES (3) alternated passes, HEAD's CLI (BIN, default .dev/s62x), DTYPES (default bf16).
# EXTRA: more bench arguments (--group 32, --asym).
# run(command="bash docs/benchmarks/logs/session62_raw/gpu_split3.sh", carry=[".dev/s62x"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s62x}; H=$OUT/split3; mkdir -p $H
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $H/commit.txt 2>/dev/null; nvidia-smi -L > $H/gpu.txt
SH=${SHAPES:-llama3-8b.o,llama3-8b.down,llama3-70b.o,llama3-70b.tp4.o,llama3-70b.tp8.qkv}
one() {  # label dtype env...
  local l=$1 d=$2; shift 2
  env "$@" timeout 90 $B/lowbit bench gemm --shapes $SH --m ${MS:-1,4,8} --dtype $d ${EXTRA:-} --reps 10 --cooldown-ms 100 \
    --out $H/${l}_${d}_p$pass > $H/${l}_${d}_p$pass.log 2>&1 || echo "$l $d pass $pass rc $?"
}
# CONFIGS: space-separated labels wWsStT (warps W, cluster size S, trigger T); "plan" = no knob; a leading "r8"
# (r8plan, r8w8s3t1) adds LOWBIT_INT4_DECODE_ROWS16=0: 8-row tiles at M = 9..32 too.
CONFIGS=${CONFIGS:-plan w4s3t1 w8s3t1 w8s3t0 w8s4t1}
for d in ${DTYPES:-bf16}; do
  for pass in $(seq 1 ${PASSES:-3}); do
    for c in $CONFIGS; do
      r8=(); k=$c
      if [ "${c#r8}" != "$c" ]; then r8=(LOWBIT_INT4_DECODE_ROWS16=0); k=${c#r8}; fi
      if [ $k = plan ]; then one $c $d "${r8[@]}"; continue; fi
      w=${k#w}; w=${w%%s*}; s=${k#*s}; s=${s%%t*}; t=${k##*t}
      one $c $d "${r8[@]}" LOWBIT_INT4_DECODE_WARPS=$w LOWBIT_INT4_DECODE_SPLITS=$s LOWBIT_INT4_DECODE_TRIGGER=$t
    done
  done
done
for f in $H/*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
done | sort -k2,3 > $H/summary.txt
python3 - $H "$CONFIGS" <<'PY' | tee $H/table.md
import sys, json, glob, os, collections
best = collections.defaultdict(lambda: 1e9)
for f in glob.glob(sys.argv[1] + '/*_p*.json'):
    label, dt, _ = os.path.basename(f)[:-5].rsplit('_', 2)
    for r in json.load(open(f))['rows']:
        k = (r['shape'], r['M'], dt, label)
        best[k] = min(best[k], r['time_us'])
        if r['wrong'] != 0: print('WRONG', f, r['shape'], r['M'])
labels = sys.argv[2].split()
print('min of the passes, us (x the plan)\n\n| shape | M | dtype | ' + ' | '.join(labels) + ' |\n|' + '---|' * (3 + len(labels)))
for k in sorted({k[:3] for k in best if k[3] == 'plan'}):
    p = best[k + ('plan',)]
    print('| %s | %d | %s | ' % k + ' | '.join('%.2f (%.3fx)' % (best[k + (l,)], best[k + (l,)] / p) if k + (l,) in best else '-' for l in labels) + ' |')
PY
(cd $OUT && tar czf ${TAG:-split3}.tgz split3 && rm -rf split3)
