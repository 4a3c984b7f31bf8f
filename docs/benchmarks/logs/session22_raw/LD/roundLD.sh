#!/usr/bin/env bash
# Session 22 round LD (the staged-x plan): GPU int4 tests (default; XW=2 every 8-warp deep tile
# staged; XW=0; lean forced), model suite, compute-sanitizer memcheck / racecheck on the push
# test (staged pairs at N = 4096, M = 16), A/B old (acd1ef7) vs new at M = 9 / 12 / 16 twice,
# and the decode tables to import.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_XW=2 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_xw2.log 2>&1; echo "== xw2 rc=$?"; tail -n 1 $R/tests_xw2.log
LOWBIT_INT4_DECODE_XW=2 LOWBIT_INT4_DECODE_LEAN=0 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_xw2_w8.log 2>&1; echo "== xw2_w8 rc=$?"; tail -n 1 $R/tests_xw2_w8.log
LOWBIT_INT4_DECODE_XW=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_xw0.log 2>&1; echo "== xw0 rc=$?"; tail -n 1 $R/tests_xw0.log
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean2.log 2>&1; echo "== lean2 rc=$?"; tail -n 1 $R/tests_lean2.log
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$?"; tail -n 1 $R/tests_model.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 150 $CS --tool memcheck $T --gtest_brief=1 --gtest_filter='*DecodePush*' > $R/memcheck_push.log 2>&1; echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck_push.log | tail -2
timeout 150 $CS --tool racecheck $T --gtest_brief=1 --gtest_filter='*DecodePush*' > $R/racecheck_push.log 2>&1; echo "== racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $R/racecheck_push.log | tail -2
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 9,12,16 --path skinny --reps 10 --out $R/g_${v}_$rep > $R/g_${v}_$rep.log 2>&1; echo "== g_${v}_$rep rc=$?"
done; done
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
n=[load(f'{R}/g_new_{r}.md') for r in (1,2)]; o=[load(f'{R}/g_old_{r}.md') for r in (1,2)]
for k in o[0]:
    a=min(x[k] for x in n); b=min(x[k] for x in o); print(*k, f"new {a:.1f} old {b:.1f} ratio {a/b:.3f}")
PY
L=$B/lowbit
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "== gemm_decode rc=$?"
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out $R/gemm_decode_fp16 > $R/gemm_decode_fp16.log 2>&1; echo "== gemm_decode_fp16 rc=$?"
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
