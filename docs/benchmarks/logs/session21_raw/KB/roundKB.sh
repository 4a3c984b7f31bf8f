#!/usr/bin/env bash
# Session 21 round KB: lean 16-row tiles (DecodeTiles::kRows16Lean) where the plan takes them,
# every other tile as before. (1) GPU int4 suites, lean forced on every 8-warp deep tile
# (LOWBIT_INT4_DECODE_LEAN=2), the push test and compute-sanitizer on lean tiles; (2) A/B old
# (f837717) vs new alternating twice, bf16 M = 1,8,9,12,16 and fp16 M = 1,8,12,16; (3) tables.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
CS=/usr/local/cuda/bin/compute-sanitizer
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_lean2_w8.log 2>&1; echo "== lean2_w8 rc=$?"; tail -n 1 $R/tests_lean2_w8.log
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_lean2_xs0.log 2>&1; echo "== lean2_xs0 rc=$?"; tail -n 1 $R/tests_lean2_xs0.log
LOWBIT_INT4_DECODE_LEAN=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_lean0.log 2>&1; echo "== lean0 rc=$?"; tail -n 1 $R/tests_lean0.log
LOWBIT_INT4_DECODE_LEAN=2 timeout 60 $T --gtest_filter='*DecodePush*' > $R/tests_lean2_push.log 2>&1; echo "== lean2_push rc=$?"; tail -n 1 $R/tests_lean2_push.log
LOWBIT_INT4_DECODE_LEAN=2 timeout 120 $CS --tool memcheck $T --gtest_brief=1 --gtest_filter='*DecodePush*' > $R/memcheck_lean2_push.log 2>&1; echo "== memcheck rc=$?"; tail -n 2 $R/memcheck_lean2_push.log
LOWBIT_INT4_DECODE_LEAN=2 timeout 120 $CS --tool synccheck $T --gtest_brief=1 --gtest_filter='*DecodePush*' > $R/synccheck_lean2_push.log 2>&1; echo "== synccheck rc=$?"; tail -n 2 $R/synccheck_lean2_push.log
timeout 60 $B/lowbit_example_int4_linear > $R/example.log 2>&1; echo "== example rc=$?"; tail -n 2 $R/example.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,9,12,16 --path skinny --reps 10 --out $R/gemm_${v}_$rep > $R/gemm_${v}_$rep.log 2>&1; echo "== gemm_${v}_$rep rc=$?"
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --dtype fp16 --reps 10 --out $R/gemm_fp16_${v}_$rep > $R/gemm_fp16_${v}_$rep.log 2>&1; echo "== gemm_fp16_${v}_$rep rc=$?"
done; done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
python3 - $R <<'PY'
import sys
R=sys.argv[1]
def load(f):
    d={}; ti=None
    try:
        for l in open(f):
            c=[x.strip() for x in l.split('|')[1:-1]]
            if l.startswith('| shape'): ti=c.index('time_us'); continue
            if ti is not None and l.startswith('| ') and not l.startswith('|-'):
                try: d[(c[0],c[2],c[3])]=float(c[ti])
                except: pass
    except Exception: pass
    return d
for kind in ['gemm','gemm_fp16']:
    n=[load(f'{R}/{kind}_new_{r}.md') for r in (1,2)]; o=[load(f'{R}/{kind}_old_{r}.md') for r in (1,2)]
    print('--',kind)
    for k in n[0]:
        try:
            a=min(x[k] for x in n); b=min(x[k] for x in o)
            print(f"{' '.join(k)}: new {a:.1f} old {b:.1f} ratio {a/b:.3f}")
        except Exception as e: pass
PY
L=$B/lowbit
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "== gemm_decode rc=$?"
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out $R/gemm_decode_fp16 > $R/gemm_decode_fp16.log 2>&1; echo "== gemm_decode_fp16 rc=$?"
tar -C $R -czf $OUT/results.tgz .
timeout 150 $L bench gemm --out $R/gemm > $R/gemm.log 2>&1; echo "== gemm rc=$?"
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
