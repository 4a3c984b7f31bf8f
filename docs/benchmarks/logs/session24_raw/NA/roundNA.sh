#!/usr/bin/env bash
# Session 24 round NA (experiment knob LOWBIT_INT4_DECODE_B5: 4-warp 8-row tiles with 2 stages,
# 5 blocks per SM, 96 registers): MoE at M = 2..8 and dense M = 1 / 8 with and without it,
# with and without split-K clusters of 2 (SPLITS=2), twice alternating; MoE tests with B5.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
L=$B/lowbit
MS=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite
DS=llama3-70b.gate_up,llama3-8b.gate_up,llama3-70b.down,llama3-70b.qkv
moe() { local n=$1; shift; env "$@" timeout 90 $L bench moe --m 2,4,8,16 --shapes $MS --path fused --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
den() { local n=$1; shift; env "$@" timeout 60 $L bench gemm --m 1,8 --shapes $DS --path skinny --reps 10 --cooldown-ms 500 --out $R/d_$n > $R/d_$n.log 2>&1; echo "== d_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do
  moe plan_$rep A=1
  moe b5_$rep LOWBIT_INT4_DECODE_B5=1
  moe s2_$rep LOWBIT_INT4_DECODE_SPLITS=2
  moe b5s2_$rep LOWBIT_INT4_DECODE_B5=1 LOWBIT_INT4_DECODE_SPLITS=2
  den plan_$rep A=1
  den b5_$rep LOWBIT_INT4_DECODE_B5=1
  tar -C $R -czf $OUT/results.tgz .
done
LOWBIT_INT4_DECODE_B5=1 timeout 120 $B/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*:Forced/Int4Gemm*' > $R/tests_b5.log 2>&1; echo "== tests_b5 rc=$?"; tail -n 1 $R/tests_b5.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_b5.log | head -20
python3 - $R <<'PY'
import sys, os, glob
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
for kind, vs in (('m',['plan','b5','s2','b5s2']),('d',['plan','b5'])):
    V={v:[load(f'{R}/{kind}_{v}_{r}.md') for r in (1,2)] for v in vs}
    keys=sorted(V['plan'][0].keys(), key=lambda k:(k[0],int(k[1])))
    print(kind, 'min of two, us (#wrong):', ' '.join(vs))
    for k in keys:
        row=[]
        for v in vs:
            t=[x[k][0] for x in V[v] if k in x]; w=[x[k][1] for x in V[v] if k in x]
            row.append(f"{min(t):7.1f}({','.join(w)})" if t else '   -   ')
        print(f"  {k[0]:22s} M={k[1]:>3s} "+' '.join(row))
PY
tar -C $R -czf $OUT/results.tgz .
