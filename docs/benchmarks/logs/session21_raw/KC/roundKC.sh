#!/usr/bin/env bash
# Session 21 round KC (binaries c8f8d23, the final kernels): GPU int4 / model suites, lean
# forced; A/B old (f837717) vs new at M = 9, 10, 11 alternating twice; the decode tables and
# the full bench gemm to import.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_LEAN=2 LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*:*DecodePush*' > $R/tests_lean2_w8.log 2>&1; echo "== lean2_w8 rc=$?"; tail -n 1 $R/tests_lean2_w8.log
LOWBIT_INT4_DECODE_LEAN=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_lean0.log 2>&1; echo "== lean0 rc=$?"; tail -n 1 $R/tests_lean0.log
LOWBIT_INT4_DECODE_XSHARED=2 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_xs2.log 2>&1; echo "== xs2 rc=$?"; tail -n 1 $R/tests_xs2.log
LOWBIT_INT4_MOE_PIPE=0 timeout 60 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_decode.log 2>&1; echo "== moe_decode rc=$?"; tail -n 1 $R/tests_moe_decode.log
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$?"; tail -n 1 $R/tests_model.log
timeout 60 $B/lowbit_example_int4_linear > $R/example.log 2>&1; echo "== example rc=$?"; tail -n 2 $R/example.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 9,10,11 --path skinny --reps 10 --out $R/gemm9_${v}_$rep > $R/gemm9_${v}_$rep.log 2>&1; echo "== gemm9_${v}_$rep rc=$?"
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
n=[load(f'{R}/gemm9_new_{r}.md') for r in (1,2)]; o=[load(f'{R}/gemm9_old_{r}.md') for r in (1,2)]
for k in n[0]:
    a=min(x[k] for x in n); b=min(x[k] for x in o); print(*k, f"new {a:.1f} old {b:.1f} ratio {a/b:.3f}")
PY
L=$B/lowbit
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "== gemm_decode rc=$?"
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out $R/gemm_decode_fp16 > $R/gemm_decode_fp16.log 2>&1; echo "== gemm_decode_fp16 rc=$?"
tar -C $R -czf $OUT/results.tgz .
timeout 150 $L bench gemm --out $R/gemm > $R/gemm.log 2>&1; echo "== gemm rc=$?"
grep -h 'total #wrong' $R/*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
