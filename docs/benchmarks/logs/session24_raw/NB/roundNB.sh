#!/usr/bin/env bash
# Session 24 round NB: the single-token MoE path at M = 2..8 (a block per pick; knob
# LOWBIT_INT4_MOE_SINGLE_MAXM): tests (bit-identical to the four launches at M = 1, 2, 3, 8),
# compute-sanitizer, and bench moe at M = 1..16 with the bound at 1 (the old rule) and 8,
# twice alternating.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 100 $T --gtest_brief=1 --gtest_filter='*MoeSingleToken*' > $R/tests_single.log 2>&1; echo "== single rc=$? $(( $(date +%s)-t0 ))s"; tail -n 1 $R/tests_single.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_single.log | head -30
L=$B/lowbit
MS=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b
moe() { local n=$1; shift; env "$@" timeout 120 $L bench moe --m 1,2,3,4,6,8,16 --shapes $MS --path fused --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do
  moe old_$rep LOWBIT_INT4_MOE_SINGLE_MAXM=1
  moe new_$rep LOWBIT_INT4_MOE_SINGLE_MAXM=8
  tar -C $R -czf $OUT/results.tgz .
done
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None; wi=None; fi=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); wi=c.index('#wrong'); fi=c.index('%floor'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=(float(c[ti]), c[wi], c[fi])
            except: pass
    return d
vs=['old','new']
V={v:[load(f'{R}/m_{v}_{r}.md') for r in (1,2)] for v in vs}
keys=sorted(V['old'][0].keys(), key=lambda k:(k[0],int(k[1])))
print('min of two, us (#wrong) %floor: old(bound 1) new(bound 8) ratio')
for k in keys:
    t={v:[x[k] for x in V[v] if k in x] for v in vs}
    o=min(a[0] for a in t['old']); n=min(a[0] for a in t['new'])
    print(f"  {k[0]:22s} M={k[1]:>3s} {o:7.1f}({','.join(a[1] for a in t['old'])}) {t['old'][0][2]:>5s}%  {n:7.1f}({','.join(a[1] for a in t['new'])}) {t['new'][0][2]:>5s}%  {n/o:5.2f}")
PY
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -n 1 $R/tests_int4.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -20
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  timeout 200 $CS --tool $tool $T --gtest_brief=1 --gtest_filter='Cases/Int4MoeSingleToken.*/0:Cases/Int4MoeSingleToken.*/3:Cases/Int4MoeSingleToken.*/7' > $R/san_$tool.log 2>&1; echo "== $tool rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $R/san_$tool.log | tail -3
done
tar -C $R -czf $OUT/results.tgz .
