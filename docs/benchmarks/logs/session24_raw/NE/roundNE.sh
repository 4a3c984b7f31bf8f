#!/usr/bin/env bash
# Session 24 round NE (binaries of e72902c, the fix): the single-token path's bound
# (LOWBIT_INT4_MOE_SINGLE_MAXM 2 = default, 3, 4, 8) at M = 1..16, alternating twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
MS=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b
moe() { local n=$1; shift; env "$@" timeout 120 $B/lowbit bench moe --m 1,2,3,4,6,8,16 --shapes $MS --path fused --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do
  for b in 2 3 4 8; do moe b${b}_$rep LOWBIT_INT4_MOE_SINGLE_MAXM=$b; done
  tar -C $R -czf $OUT/results.tgz .
done
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None; wi=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); wi=c.index('#wrong'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=(float(c[ti]), c[wi])
            except: pass
    return d
vs=['b2','b3','b4','b8']
V={v:[load(f'{R}/m_{v}_{r}.md') for r in (1,2)] for v in vs}
keys=sorted(V['b2'][0].keys(), key=lambda k:(k[0],int(k[1])))
print('min of two, us (#wrong): ' + ' '.join(vs))
for k in keys:
    t={v:[x[k] for x in V[v] if k in x] for v in vs}
    print(f"  {k[0]:22s} M={k[1]:>3s} " + ' '.join(f"{min(a[0] for a in t[v]):7.1f}({','.join(a[1] for a in t[v])})" for v in vs))
PY
tar -C $R -czf $OUT/results.tgz .
