#!/usr/bin/env bash
# Session 65: one CLI, several knob settings, alternated passes; table of the min per (shape, M, dtype, setting) and
# its ratio to "plan" (no knob). CONFIGS: space-separated "label" or "label:VAR=V,VAR=V" (plan must be first);
# SHAPES, MS, DTYPES (bf16), PASSES (2), EXTRA (more bench arguments), TAG (archive name), BIN (the CLI's folder).
# run(command="SHAPES=... MS=1,8 CONFIGS='plan xe0:LOWBIT_INT4_DECODE_XEARLY=0' bash
#   docs/benchmarks/logs/session65_raw/gpu_knobs.sh", carry=[".dev/s65x"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s65x}; T=${TAG:-knobs}; H=$OUT/$T; mkdir -p $H
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $H/commit.txt 2>/dev/null; nvidia-smi -L | tee $H/gpu.txt
for d in ${DTYPES:-bf16}; do
  for pass in $(seq 1 ${PASSES:-2}); do
    for c in $CONFIGS; do
      l=${c%%:*}; e=(); [ "$l" != "$c" ] && IFS=, read -ra e <<< "${c#*:}"
      env "${e[@]}" timeout 120 $B/lowbit bench gemm --shapes $SHAPES --m $MS --dtype $d ${EXTRA:-} --reps 10 \
        --cooldown-ms 100 --out $H/${l}_${d}_p$pass > $H/${l}_${d}_p$pass.log 2>&1 || echo "$l $d pass $pass rc $?"
    done
  done
done
python3 - $H "$CONFIGS" <<'PY' | tee $H/table.md
import sys, json, glob, os, collections
best = collections.defaultdict(lambda: 1e9); wrong = 0
for f in glob.glob(sys.argv[1] + '/*_p*.json'):
    label, dt, _ = os.path.basename(f)[:-5].rsplit('_', 2)
    for r in json.load(open(f))['rows']:
        k = (r['shape'], r['M'], dt, label)
        best[k] = min(best[k], r['time_us'])
        if r['wrong'] != 0: print('WRONG', f, r['shape'], r['M']); wrong += 1
labels = [c.split(':')[0] for c in sys.argv[2].split()]
print('min of the passes, us (x the plan); rows with #wrong != 0: %d\n' % wrong)
print('| shape | M | dtype | ' + ' | '.join(labels) + ' |\n|' + '---|' * (3 + len(labels)))
for k in sorted({k[:3] for k in best if k[3] == 'plan'}):
    p = best[k + ('plan',)]
    print('| %s | %d | %s | ' % k + ' | '.join('%.2f (%.3fx)' % (best[k + (l,)], best[k + (l,)] / p) if k + (l,) in best else '-' for l in labels) + ' |')
PY
(cd $OUT && tar czf $T.tgz $T && rm -rf $T)
