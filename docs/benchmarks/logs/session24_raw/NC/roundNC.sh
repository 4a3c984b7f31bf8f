#!/usr/bin/env bash
# Session 24 round NC (binaries of 47acc47: the MoE single-token path at M <= 2; lowbit_old =
# ea048f0, the code before it): GPU int4 + model tests, the single-token cases under
# compute-sanitizer, bench moe at small M (new default / bound 1 / old binary, alternating
# twice), then the default bench moe (moe.md).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -n 1 $R/tests_int4.log
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s"; tail -n 1 $R/tests_model.log
LOWBIT_INT4_MOE_SINGLE=0 timeout 100 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_single0.log 2>&1; echo "== moe single off rc=$?"; tail -n 1 $R/tests_moe_single0.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_*.log | head -30
MS=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b
moe() { local n=$1 bin=$2; shift 2; env "$@" timeout 120 $B/$bin bench moe --m 1,2,3,4,8,16 --shapes $MS --path fused --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do
  moe new_$rep lowbit A=1
  moe bound1_$rep lowbit LOWBIT_INT4_MOE_SINGLE_MAXM=1
  moe old_$rep lowbit_old A=1
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
vs=['new','bound1','old']
V={v:[load(f'{R}/m_{v}_{r}.md') for r in (1,2)] for v in vs}
keys=sorted(V['new'][0].keys(), key=lambda k:(k[0],int(k[1])))
print('min of two, us (#wrong): new bound1 old  new/old')
for k in keys:
    t={v:[x[k] for x in V[v] if k in x] for v in vs}
    m={v:min(a[0] for a in t[v]) for v in vs}
    print(f"  {k[0]:22s} M={k[1]:>3s} " + ' '.join(f"{m[v]:7.1f}({','.join(a[1] for a in t[v])})" for v in vs) + f"  {m['new']/m['old']:5.2f}")
PY
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  timeout 150 $CS --tool $tool $T --gtest_brief=1 --gtest_filter='Cases/Int4MoeSingleToken.*/0:Cases/Int4MoeSingleToken.*/3:Cases/Int4MoeSingleToken.*/7' > $R/san_$tool.log 2>&1; echo "== $tool rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $R/san_$tool.log | tail -3
done
tar -C $R -czf $OUT/results.tgz .
timeout 200 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "== moe rc=$? $(( $(date +%s)-t0 ))s"; grep -E "qwen3|deepseek|mixtral" $R/moe.log | awk '$4<=16' | head -20; tail -1 $R/moe.log
tar -C $R -czf $OUT/results.tgz .
