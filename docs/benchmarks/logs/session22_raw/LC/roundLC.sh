#!/usr/bin/env bash
# Session 22 round LC: staged x (DecodeCfg::XW) in the 8-warp deep 16-row tile. GPU int4 tests
# (default; lean plans on the deep tile; every 8-warp deep tile lean; XW off; 8 warps forced);
# A/B old (acd1ef7) vs new at M = 9..16 (bf16 twice, fp16 once) and the lean plans run deep
# with XW (LOWBIT_INT4_DECODE_LEAN=0) against the plan.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_LEAN=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean0.log 2>&1; echo "== lean0 (XW) rc=$?"; tail -n 1 $R/tests_lean0.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_lean0.log | head -30
LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_LEAN=0 LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_w8.log 2>&1; echo "== w8 (XW) rc=$?"; tail -n 1 $R/tests_w8.log
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 9,12,16 --path skinny --reps 10 --out $R/g_${v}_$rep > $R/g_${v}_$rep.log 2>&1; echo "== g_${v}_$rep rc=$?"
  LOWBIT_INT4_DECODE_LEAN=0 timeout 60 $L bench gemm --m 9,12,16 --path skinny --reps 10 --out $R/gl0_${v}_$rep > $R/gl0_${v}_$rep.log 2>&1; echo "== gl0_${v}_$rep rc=$?"
done; done
for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 9,12,16 --path skinny --dtype fp16 --reps 10 --out $R/gf_${v} > $R/gf_${v}.log 2>&1; echo "== gf_${v} rc=$?"
done
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
def cmp(tag, n, o):
    for k in o[0]:
        try:
            a=min(x[k] for x in n); b=min(x[k] for x in o); print(tag, *k, f"new {a:.1f} old {b:.1f} ratio {a/b:.3f}")
        except Exception as e: print(tag, k, 'ERR', e)
cmp('bf16', [load(f'{R}/g_new_{r}.md') for r in (1,2)], [load(f'{R}/g_old_{r}.md') for r in (1,2)])
cmp('lean0new_vs_old', [load(f'{R}/gl0_new_{r}.md') for r in (1,2)], [load(f'{R}/g_old_{r}.md') for r in (1,2)])
cmp('lean0new_vs_new', [load(f'{R}/gl0_new_{r}.md') for r in (1,2)], [load(f'{R}/g_new_{r}.md') for r in (1,2)])
cmp('fp16', [load(f'{R}/gf_new.md')], [load(f'{R}/gf_old.md')])
PY
grep -h 'total #wrong' $R/*.log | sort | uniq -c
tar -C $R -czf $OUT/results.tgz .
echo "elapsed $(( $(date +%s)-t0 ))s"
LOWBIT_INT4_DECODE_XW=0 LOWBIT_INT4_DECODE_LEAN=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_xw0.log 2>&1; echo "== xw0 rc=$?"; tail -n 1 $R/tests_xw0.log
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean2.log 2>&1; echo "== lean2 rc=$?"; tail -n 1 $R/tests_lean2.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
