#!/usr/bin/env bash
# Session 25 round PB (binaries of the commit in the bench headers): tests of the pipelined cases
# (default, with the 16 / 48-row wgmma knobs, mma.sync only); gemm at M = 9..16 (16-row tiles: wgmma
# vs mma.sync, G = 128 forced and G = 32 kAuto) and M = 33..48 (48 vs 64-row tiles); MoE align
# block sizes 16 / 32 / 64 forced vs the rule at M = 64..768.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
F='Forced/Int4Gemm.*:Pipelined/*:Layouts/*'
tt() { local n=$1; shift; env "$@" timeout 150 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_$n.log 2>&1; echo "== tests_$n rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_$n.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_$n.log | head -30; }
tt def
tt wg1648 LOWBIT_INT4_PIPE_WG16=1 LOWBIT_INT4_PIPE_WG48=1
tt mma LOWBIT_INT4_PIPE_WGMMA=0
g() { local n=$1 ms=$2 path=$3 grp=$4; shift 4; env "$@" timeout 120 $B/lowbit bench gemm --m $ms --path $path --group $grp --reps 10 --cooldown-ms 500 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
for rep in 1 2; do
  g s16_$rep 9,12,16 pipelined 128
  g w16_$rep 9,12,16 pipelined 128 LOWBIT_INT4_PIPE_WG16=1
  g a32_$rep 9,16 auto 32
  g b32_$rep 9,16 auto 32 LOWBIT_INT4_PIPE_WG16=1
  g s48_$rep 33,40,48 pipelined 128
  g w48_$rep 33,40,48 pipelined 128 LOWBIT_INT4_PIPE_WG48=1
  tar -C $R -czf $OUT/results.tgz .
done
m() { local n=$1; shift; env "$@" timeout 120 $B/lowbit bench moe --m 64,128,192,256,384,512,768 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b --path fused --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
mb() { local n=$1 b=$2; LOWBIT_INT4_PIPE_WG16=1 timeout 120 $B/lowbit bench moe --m 64,128,192,256,384,512,768 --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b --path fused --block-m $b --reps 10 --out $R/m_$n > $R/m_$n.log 2>&1; echo "== m_$n rc=$? $(( $(date +%s)-t0 ))s"; }
m def; m def16 LOWBIT_INT4_PIPE_WG16=1
for b in 16 32 64; do mb b$b $b; done
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
for pair in (('s16','w16'),('a32','b32'),('s48','w48')):
    V={v:[load(f'{R}/g_{v}_{r}.md') for r in (1,2)] for v in pair}
    print('gemm min of two, us (#wrong):', pair, 'cublas')
    for k in sorted(V[pair[0]][0].keys(), key=lambda k:(k[0],int(k[1]))):
        t={v:[x[k] for x in V[v] if k in x] for v in pair}
        a,b=(min(x[0] for x in t[v]) for v in pair)
        print(f"  {k[0]:20s} M={k[1]:>3s} {a:7.1f} {b:7.1f} ({b/a:.3f}) wrong {','.join(x[1] for v in pair for x in t[v])} | {t[pair[0]][0][2]:7.1f}")
vs=['def','def16','b16','b32','b64']
M={v:load(f'{R}/m_{v}.md') for v in vs}
print('moe fused, us: ' + ' '.join(vs))
for k in sorted(M['def'].keys(), key=lambda k:(k[0],int(k[1]))):
    print(f"  {k[0]:20s} M={k[1]:>3s} " + ' '.join(f"{M[v].get(k,(0,'?'))[0]:7.1f}({M[v].get(k,(0,'?'))[1]})" for v in vs))
PY
