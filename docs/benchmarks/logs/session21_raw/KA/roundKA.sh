#!/usr/bin/env bash
# Session 21 round KA: (1) GPU int4 suites of the rolling x register set + two 8-warp 16-row
# blocks per SM (128 registers, words read per step, x half a batch ahead); (2) A/B, old (HEAD
# f837717 = a02d40c's kernels) vs new, alternating twice: bench gemm bf16 / fp16 M = 1,8,12,16,
# bench moe M = 1..32; (3) forced block shapes of the new binary at M = 12, 16.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -40
LOWBIT_INT4_DECODE_XSHARED=0 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_xs0.log 2>&1; echo "== xs0 rc=$?"; tail -n 1 $R/tests_xs0.log
LOWBIT_INT4_DECODE_WARPS=8 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_w8.log 2>&1; echo "== w8 rc=$?"; tail -n 1 $R/tests_w8.log
LOWBIT_INT4_MOE_PIPE=0 timeout 60 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_decode.log 2>&1; echo "== moe_decode rc=$?"; tail -n 1 $R/tests_moe_decode.log
timeout 60 $B/lowbit_example_int4_linear > $R/example.log 2>&1; echo "== example rc=$?"; tail -n 3 $R/example.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --reps 10 --out $R/gemm_${v}_$rep > $R/gemm_${v}_$rep.log 2>&1; echo "== gemm_${v}_$rep rc=$?"
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --dtype fp16 --reps 10 --out $R/gemm_fp16_${v}_$rep > $R/gemm_fp16_${v}_$rep.log 2>&1; echo "== gemm_fp16_${v}_$rep rc=$?"
  timeout 90 $L bench moe --m 1,8,16,32 --reps 10 --out $R/moe_${v}_$rep > $R/moe_${v}_$rep.log 2>&1; echo "== moe_${v}_$rep rc=$?"
done; done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
L=$B/lowbit
LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1 timeout 60 $L bench gemm --m 12,16 --path skinny --reps 10 --out $R/f_w8s1 > $R/f_w8s1.log 2>&1; echo "== w8s1 rc=$?"
LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2 timeout 60 $L bench gemm --m 12,16 --path skinny --reps 10 --out $R/f_w8s2 > $R/f_w8s2.log 2>&1; echo "== w8s2 rc=$?"
LOWBIT_INT4_DECODE_XSHARED=0 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1 timeout 60 $L bench gemm --m 12,16 --path skinny --reps 10 --out $R/f_xs0w8s1 > $R/f_xs0w8s1.log 2>&1; echo "== xs0w8s1 rc=$?"
LOWBIT_INT4_DECODE_XSHARED=0 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2 timeout 60 $L bench gemm --m 12,16 --path skinny --reps 10 --out $R/f_xs0w8s2 > $R/f_xs0w8s2.log 2>&1; echo "== xs0w8s2 rc=$?"
grep -h 'total #wrong' $R/*.log | sort | uniq -c
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
for kind in ['gemm','gemm_fp16','moe']:
    n=[load(f'{R}/{kind}_new_{r}.md') for r in (1,2)]; o=[load(f'{R}/{kind}_old_{r}.md') for r in (1,2)]
    print('--',kind)
    for k in n[0]:
        try:
            a=min(x[k] for x in n); b=min(x[k] for x in o)
            print(f"{' '.join(k)}: new {a:.1f} old {b:.1f} ratio {a/b:.3f}")
        except Exception as e: pass
f=[load(f'{R}/{x}.md') for x in ('f_w8s1','f_w8s2','f_xs0w8s1','f_xs0w8s2')]
print('-- forced w8s1 w8s2 xs0w8s1 xs0w8s2')
for k in f[0]: print(' '.join(k), *[x.get(k) for x in f])
PY
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
