#!/usr/bin/env bash
# Session 25 round PC (binaries eff6287, the final kernels and rules): GPU int4 tests (all; 48-row
# tiles forced on the pipelined cases; mma.sync only; the 32-row tile on mma.sync), model suite;
# the tables to import (gemm_medium, gemm, moe); the MoE block rule against the old one's
# choices forced (--block-m 16 / 64) at M = 128 / 256 / 512.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
tt() { local n=$1 lim=$2 f=$3; shift 3; env "$@" timeout $lim $T --gtest_brief=1 --gtest_filter="$f" > $R/tests_$n.log 2>&1; echo "== tests_$n rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_$n.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_$n.log | head -30; }
tt int4 200 '*'
tt rows48 60 'Forced/Int4Gemm*pipelined*' LOWBIT_INT4_PIPE_ROWS=48
tt mma 90 'Forced/Int4Gemm*pipelined*:Forced/*M100_N8192*:*Moe*' LOWBIT_INT4_PIPE_WGMMA=0
tt wg32off 60 'Forced/Int4Gemm*pipelined*:Pipelined/*' LOWBIT_INT4_PIPE_WG32=0
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(tail -n 1 $R/tests_model.log)"
tar -C $R -czf $OUT/results.tgz .
timeout 150 $B/lowbit bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto --path auto,skinny,pipelined,cublas --reps 5 --out $R/gemm_medium > $R/gemm_medium.log 2>&1; echo "== gemm_medium rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/gemm_medium.log)"
tar -C $R -czf $OUT/results.tgz .
timeout 150 $B/lowbit bench gemm --out $R/gemm > $R/gemm.log 2>&1; echo "== gemm rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/gemm.log)"
tar -C $R -czf $OUT/results.tgz .
timeout 150 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "== moe rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/moe.log)"
tar -C $R -czf $OUT/results.tgz .
MS=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,mixtral-8x7b
m() { local n=$1; shift; timeout 90 $B/lowbit bench moe --m 128,256,512 --shapes $MS --path fused --reps 10 "$@" --out $R/mb_$n > $R/mb_$n.log 2>&1; echo "== mb_$n rc=$? $(( $(date +%s)-t0 ))s"; }
m def; m b16 --block-m 16; m b64 --block-m 64; m def2
tar -C $R -czf $OUT/results.tgz .
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); wi=c.index('#wrong'); pi=c.index('path'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[pi],c[3])]=(float(c[ti]), c[wi])
            except: pass
    return d
vs=['def','def2','b16','b64']
M={v:load(f'{R}/mb_{v}.md') for v in vs}
print('moe us: ' + ' '.join(vs))
for k in sorted(M['def'].keys(), key=lambda k:(k[0],int(k[2]))):
    print(f"  {k[0]:20s} M={k[2]:>3s} " + ' '.join(f"{M[v].get(k,(0,'?'))[0]:7.1f}({M[v].get(k,(0,'?'))[1]})" for v in vs))
for f in ('gemm_medium','gemm','moe'):
    d=load(f'{R}/{f}.md'); w=[k for k,v in d.items() if v[1] not in ('0',)]
    print(f, len(d), 'rows; #wrong != 0:', w[:5])
PY
