#!/usr/bin/env bash
# Session 23 round MA (as run: the first version, a step-major copy [(k/16) M + r] read through a run-time step stride by every tile at M = 2..32, M * K elements; variants new / new0 / old; M = 1, 2, 8, 12, 16, 32; reconstructed from roundMB.sh): the step-major copy of x for the decode GEMM (LOWBIT_INT4_DECODE_XSTEPS).
# GPU int4 tests (default, XSTEPS=0, XSTEPS=2 + lean forced), then A/B: old (57e5ef5) vs new with
# the copy off vs the copy on every deep / lean 16-row tile (XSTEPS=2) vs new (plan), M = 1, 8, 12, 16, 24, 32.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
F='Forced/Int4Gemm*:*DecodePush*:*XSteps*'
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_XSTEPS=0 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs0.log 2>&1; echo "== xs0 rc=$?"; tail -n 1 $R/tests_xs0.log
LOWBIT_INT4_DECODE_XSTEPS=2 LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs2_lean.log 2>&1; echo "== xs2_lean rc=$?"; tail -n 1 $R/tests_xs2_lean.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_xs0.log $R/tests_xs2_lean.log | head -30
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new new0 new2 old; do
  [ $rep = 2 ] && [ $v = old ] && continue
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  X=1; [ $v = new0 ] && X=0; [ $v = new2 ] && X=2
  LOWBIT_INT4_DECODE_XSTEPS=$X timeout 90 $L bench gemm --m 1,8,12,16,24,32 --path skinny --reps 10 --out $R/g_${v}_$rep > $R/g_${v}_$rep.log 2>&1; echo "== g_${v}_$rep rc=$? $(( $(date +%s)-t0 ))s"
  tar -C $R -czf $OUT/results.tgz .
done; done
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
V={v:[load(f'{R}/g_{v}_{r}.md') for r in (1,2)] for v in ('new','new0','new2','old')}
def best(v,k):
    xs=[d[k] for d in V[v] if k in d]; return min(xs) if xs else float('nan')
for k in V['old'][0]:
    a,b,d,c=best('new',k),best('new0',k),best('new2',k),best('old',k)
    print(f"{k[0]:18} M={k[1]:>3} new {a:6.1f} new0 {b:6.1f} new2 {d:6.1f} old {c:6.1f} | new/old {a/c:.3f} new0/old {b/c:.3f} new2/new0 {d/b:.3f}")
PY
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
