#!/usr/bin/env bash
# Session 22 round LB: x fragments by 16 B loads + butterfly transpose (kVecX). GPU int4 tests
# (default, lean forced, lean off, block-shared x off, MoE on the decode tile); A/B old (acd1ef7)
# vs new, bf16 alternating twice, fp16 and MoE once each.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --reps 10 --out $R/g_${v}_$rep > $R/g_${v}_$rep.log 2>&1; echo "== g_${v}_$rep rc=$?"
done; done
for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --dtype fp16 --reps 10 --out $R/gf_${v} > $R/gf_${v}.log 2>&1; echo "== gf_${v} rc=$?"
  timeout 90 $L bench moe --m 1,8,16 --out $R/moe_${v} > $R/moe_${v}.log 2>&1; echo "== moe_${v} rc=$?"
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
cmp('fp16', [load(f'{R}/gf_new.md')], [load(f'{R}/gf_old.md')])
cmp('moe', [load(f'{R}/moe_new.md')], [load(f'{R}/moe_old.md')])
PY
grep -h 'total #wrong' $R/*.log | sort | uniq -c
tar -C $R -czf $OUT/results.tgz .
echo "elapsed $(( $(date +%s)-t0 ))s"
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean2_w8.log 2>&1; echo "== lean2_w8 rc=$?"; tail -n 1 $R/tests_lean2_w8.log
LOWBIT_INT4_DECODE_LEAN=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_lean0.log 2>&1; echo "== lean0 rc=$?"; tail -n 1 $R/tests_lean0.log
LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_xs0.log 2>&1; echo "== xs0 rc=$?"; tail -n 1 $R/tests_xs0.log
LOWBIT_INT4_MOE_PIPE=0 timeout 60 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_decode.log 2>&1; echo "== moe_decode rc=$?"; tail -n 1 $R/tests_moe_decode.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
