#!/usr/bin/env bash
# Session 25 round PE (binaries of the 96-row tile commit): kAuto at M = 65 / 80 / 96 with the
# 96-row tiles (default) and without (LOWBIT_INT4_PIPE_WG96=0: 128-row tiles), alternating twice;
# the pipelined cases with 96-row tiles forced; all GPU int4 tests.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
g() { local n=$1; shift; env "$@" timeout 90 $B/lowbit bench gemm --m 65,80,96 --path auto --reps 10 --cooldown-ms 500 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do g w96_$rep; g w128_$rep LOWBIT_INT4_PIPE_WG96=0; done
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
V={v:[load(f'{R}/g_{v}_{r}.md') for r in (1,2)] for v in ('w96','w128')}
print('kAuto min of two, us: 96-row vs 128-row tiles, ratio, cublas')
for k in sorted(V['w96'][0], key=lambda k:(k[0],int(k[1]))):
    a=min(x[k][0] for x in V['w96'] if k in x); b=min(x[k][0] for x in V['w128'] if k in x)
    print(f"  {k[0]:20s} M={k[1]:>3s} {a:7.1f} {b:7.1f} ({a/b:.3f}) wrong {','.join(x[k][1] for v in V for x in V[v] if k in x)} | {V['w96'][0][k][2]:7.1f}")
PY
T=$B/lowbit_tests_gpu_int4
tt() { local n=$1 lim=$2 f=$3; shift 3; env "$@" timeout $lim $T --gtest_brief=1 --gtest_filter="$f" > $R/tests_$n.log 2>&1; echo "== tests_$n rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_$n.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_$n.log | head -30; }
tt rows96 60 'Forced/Int4Gemm*pipelined*' LOWBIT_INT4_PIPE_ROWS=96
tar -C $R -czf $OUT/results.tgz .
tt int4 200 '*'
tar -C $R -czf $OUT/results.tgz .
