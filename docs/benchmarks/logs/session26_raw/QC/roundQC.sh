#!/usr/bin/env bash
# Session 26 round QC: the pipelined wgmma tiles with conflict-free word loads (lowbit, the commit)
# against f71b71b (lowbit_old), alternating twice, --path pipelined M = 32..512 and bench moe;
# then all GPU int4 tests of the new binaries.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv
g() { local n=$1 bin=$2; timeout 100 $B/$bin bench gemm --m 32,48,64,96,128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do g new_$rep lowbit; g old_$rep lowbit_old; done
tar -C $R -czf $OUT/results.tgz .
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); wi=c.index('#wrong'); ci=c.index('cublas_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=(float(c[ti]), c[wi], float(c[ci]))
            except: pass
    return d
V={v:[load(f'{R}/g_{v}_{r}.md') for r in (1,2)] for v in ('new','old')}
print('min of two, us: new vs old, ratio, wrong, cublas')
for k in sorted(V['new'][0], key=lambda k:(k[0],int(k[1]))):
    a=min(x[k][0] for x in V['new'] if k in x); b=min(x[k][0] for x in V['old'] if k in x)
    print(f"  {k[0]:20s} M={k[1]:>3s} {a:7.1f} {b:7.1f} ({a/b:.3f}) wrong {','.join(x[k][1] for v in V for x in V[v] if k in x)} | {V['new'][0][k][2]:7.1f}")
PY
m() { local n=$1 bin=$2; timeout 100 $B/$bin bench moe --m 128,512 --reps 5 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
m new lowbit; m old lowbit_old
grep -hE "^\| " $R/m_new.md | awk -F'|' '{print $2,$5,$8}' | head -20 > $R/m_new.txt; grep -hE "^\| " $R/m_old.md | awk -F'|' '{print $8}' | head -20 > $R/m_old.txt; paste $R/m_new.txt $R/m_old.txt
tar -C $R -czf $OUT/results.tgz .
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
tar -C $R -czf $OUT/results.tgz .
