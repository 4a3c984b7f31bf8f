#!/usr/bin/env bash
# Session 21 round KE (experiment): 12-warp deep 16-row blocks (162 registers with x rolled a
# batch ahead, one block per SM) forced at M = 12 / 16 against the plan; tests forced on them.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
T=$B/lowbit_tests_gpu_int4; L=$B/lowbit
LOWBIT_INT4_DECODE_WARPS=12 LOWBIT_INT4_DECODE_LEAN=0 LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_w12.log 2>&1; echo "== w12 rc=$?"; tail -n 1 $R/tests_w12.log
grep -m3 -B2 -A10 "Failure" $R/tests_w12.log | head -30
for v in plan w12s1 w12s2 plan2; do case $v in plan|plan2) E="";; w12s1) E="LOWBIT_INT4_DECODE_WARPS=12 LOWBIT_INT4_DECODE_SPLITS=1 LOWBIT_INT4_DECODE_LEAN=0 LOWBIT_INT4_DECODE_XSHARED=0";; w12s2) E="LOWBIT_INT4_DECODE_WARPS=12 LOWBIT_INT4_DECODE_SPLITS=2 LOWBIT_INT4_DECODE_LEAN=0 LOWBIT_INT4_DECODE_XSHARED=0";; esac
  env $E timeout 60 $L bench gemm --m 9,12,16 --path skinny --reps 10 --out $R/g_$v > $R/g_$v.log 2>&1; echo "== $v rc=$?"
  env $E timeout 60 $L bench gemm --m 12,16 --path skinny --dtype fp16 --reps 10 --out $R/h_$v > $R/h_$v.log 2>&1; echo "== fp16 $v rc=$?"
done
grep -h 'total #wrong' $R/*.log | sort | uniq -c
python3 - $R <<'PY'
import sys
R=sys.argv[1]
def load(f):
    d={}; ti=None
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=float(c[ti])
            except: pass
    return d
for p in 'gh':
    f=[load(f'{R}/{p}_{x}.md') for x in ('plan','w12s1','w12s2','plan2')]
    print('--', 'bf16' if p=='g' else 'fp16', 'shape M plan w12s1 w12s2 plan2')
    for k in f[0]: print(*k, *[x.get(k) for x in f])
PY
tar -C $R -czf $OUT/results.tgz .
