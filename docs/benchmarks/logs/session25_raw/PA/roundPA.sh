#!/usr/bin/env bash
# Session 25 round PA: 32-row wgmma tiles (m64n32k16) in the pipelined kernel. Binaries: lowbit_wg3
# (3 blocks per SM launch bound), lowbit_wg2 (2 per SM), old = lowbit_wg3 with LOWBIT_INT4_PIPE_WG32=0
# (the mma.sync 32-row tile); tests on the wg3 build.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 150 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm.*:Pipelined/*:Layouts/*' > $R/tests_pipe.log 2>&1; echo "== tests rc=$? $(( $(date +%s)-t0 ))s"; tail -n 1 $R/tests_pipe.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_pipe.log | head -30
g() { local n=$1 bin=$2 path=$3; shift 3; env "$@" timeout 120 $B/$bin bench gemm --m 17,24,32 --path $path --reps 10 --cooldown-ms 500 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do
  g wg3_$rep lowbit_wg3 pipelined
  g wg2_$rep lowbit_wg2 pipelined
  g old_$rep lowbit_wg3 pipelined LOWBIT_INT4_PIPE_WG32=0
  tar -C $R -czf $OUT/results.tgz .
done
g dec_1 lowbit_wg3 skinny
m() { local n=$1 bin=$2; shift 2; env "$@" timeout 120 $B/$bin bench moe --m 96,256,384 --shapes qwen3-30b-a3b.tp1,deepseek-v2-lite,mixtral-8x7b --path fused --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
m wg3 lowbit_wg3; m old lowbit_wg3 LOWBIT_INT4_PIPE_WG32=0; m wg2 lowbit_wg2
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
vs=['wg3','wg2','old']
V={v:[load(f'{R}/g_{v}_{r}.md') for r in (1,2)] for v in vs}
D=load(f'{R}/g_dec_1.md')
keys=sorted(V['wg3'][0].keys(), key=lambda k:(k[0],int(k[1])))
print('gemm pipelined, min of two, us (#wrong): ' + ' '.join(vs) + ' | decode | cublas')
for k in keys:
    t={v:[x[k] for x in V[v] if k in x] for v in vs}
    print(f"  {k[0]:20s} M={k[1]:>3s} " + ' '.join(f"{min(a[0] for a in t[v]):7.1f}({','.join(a[1] for a in t[v])})" for v in vs) + f" | {D.get(k,(0,'?'))[0]:7.1f}({D.get(k,(0,'?'))[1]}) | {t['wg3'][0][2]:7.1f}")
M={v:load(f'{R}/m_{v}.md') for v in vs}
print('moe fused, us: ' + ' '.join(vs))
for k in sorted(M['wg3'].keys(), key=lambda k:(k[0],int(k[1]))):
    print(f"  {k[0]:20s} M={k[1]:>3s} " + ' '.join(f"{M[v].get(k,(0,'?'))[0]:7.1f}({M[v].get(k,(0,'?'))[1]})" for v in vs))
PY
