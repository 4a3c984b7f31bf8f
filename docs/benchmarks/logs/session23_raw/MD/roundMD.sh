#!/usr/bin/env bash
# Session 23 round MD (binaries ba2056b, the final code): GPU int4 tests (default; the x copy
# off; on for every deep / lean tile, also with lean forced and with block-shared x off so that
# the M = 9..16 cases run unshared tiles), model suite, the example, compute-sanitizer memcheck /
# initcheck / racecheck on the copy's tests, then the decode tables to import (bf16, fp16, and
# M = 24 / 32) and an A/B against 57e5ef5 at M = 12 / 16 / 32.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
F='Forced/Int4Gemm*:*DecodePush*:*XSteps*'
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_XSTEPS=0 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs0.log 2>&1; echo "== xs0 rc=$?"; tail -n 1 $R/tests_xs0.log
LOWBIT_INT4_DECODE_XSTEPS=2 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs2.log 2>&1; echo "== xs2 rc=$?"; tail -n 1 $R/tests_xs2.log
LOWBIT_INT4_DECODE_XSTEPS=2 LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs2_xsh0.log 2>&1; echo "== xs2_xsh0 rc=$?"; tail -n 1 $R/tests_xs2_xsh0.log
LOWBIT_INT4_DECODE_XSTEPS=2 LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter="$F" > $R/tests_xs2_lean.log 2>&1; echo "== xs2_lean rc=$?"; tail -n 1 $R/tests_xs2_lean.log
grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_xs*.log | head -30
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$?"; tail -n 1 $R/tests_model.log
timeout 60 $B/lowbit_example_int4_linear > $R/example.log 2>&1; echo "== example rc=$?"; tail -n 2 $R/example.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck initcheck racecheck; do
  LOWBIT_INT4_DECODE_XSTEPS=2 timeout 150 $CS --tool $tool $T --gtest_brief=1 --gtest_filter='*XSteps*' > $R/${tool}_xsteps.log 2>&1; echo "== $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $R/${tool}_xsteps.log | tail -2
done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
L=$B/lowbit
timeout 90 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "== gemm_decode rc=$?"
timeout 90 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out $R/gemm_decode_fp16 > $R/gemm_decode_fp16.log 2>&1; echo "== gemm_decode_fp16 rc=$?"
timeout 90 $L bench gemm --m 1,8,12,16,24,32 --layout auto --path skinny --out $R/gemm_decode_m32 > $R/gemm_decode_m32.log 2>&1; echo "== gemm_decode_m32 rc=$?"
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 12,16,32 --path skinny --reps 10 --out $R/g_${v}_$rep > $R/g_${v}_$rep.log 2>&1; echo "== g_${v}_$rep rc=$?"
done; done
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=float(c[ti])
            except: pass
    return d
n=[load(f'{R}/g_new_{r}.md') for r in (1,2)]; o=[load(f'{R}/g_old_{r}.md') for r in (1,2)]
for k in o[0]:
    a=min(x[k] for x in n if k in x); b=min(x[k] for x in o if k in x); print(f"{k[0]:20} M={k[1]:>3} new {a:6.1f} old {b:6.1f} ratio {a/b:.3f}")
PY
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
