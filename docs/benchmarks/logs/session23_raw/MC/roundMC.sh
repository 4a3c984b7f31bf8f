#!/usr/bin/env bash
# Session 23 round MC (binaries 94783d1, knobs only): the mid-size shapes below 50% at M = 9..16
# with the x copy on other tiles: deep + copy (XSTEPS=2), lean + copy (LEAN=2 XSTEPS=2; 70b.o
# also with SPLITS=2 for lean pairs), against the plan; twice, alternating.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
L=$B/lowbit
S=llama3-70b.o,llama3-8b.down,llama3-8b.qkv,llama3-8b.o,llama3-70b.down
run() {  # name, env...
  local n=$1; shift
  env "$@" timeout 60 $L bench gemm --m 9,12,16 --shapes $S --path skinny --reps 10 --cooldown-ms 500 --out $R/$n > $R/$n.log 2>&1; echo "== $n rc=$? $(( $(date +%s)-t0 ))s"
}
for rep in 1 2; do
  run plan_$rep A=1
  run deepcopy_$rep LOWBIT_INT4_DECODE_XSTEPS=2
  run lean_$rep LOWBIT_INT4_DECODE_LEAN=2
  run leancopy_$rep LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_XSTEPS=2
  run leanpaircopy_$rep LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_SPLITS=2 LOWBIT_INT4_DECODE_XSTEPS=2
  run leanpair_$rep LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_SPLITS=2
  tar -C $R -czf $OUT/results.tgz .
done
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=float(c[ti])
            except: pass
    return d
vs=['plan','deepcopy','lean','leancopy','leanpaircopy','leanpair']
V={v:[load(f'{R}/{v}_{r}.md') for r in (1,2)] for v in vs}
def best(v,k):
    xs=[d[k] for d in V[v] if k in d]; return min(xs) if xs else float('nan')
print(' '*22+' '.join(f'{v:>12}' for v in vs))
for k in V['plan'][0]:
    print(f"{k[0]:16} M={k[1]:>3} "+' '.join(f'{best(v,k):12.1f}' for v in vs))
PY
grep -h 'total #wrong' $R/*.log | sort | uniq -c
tar -C $R -czf $OUT/results.tgz .
