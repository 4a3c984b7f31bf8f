#!/usr/bin/env bash
# Session 20 round JB: (1) GPU suites of 13b0078 + the one-MMA sum(x) of the 16-row tiles
# (int4 full, model, codec, the int4 example); (2) A/B, old (13b0078's kernels = 81248f4's)
# vs new (16-row tiles: x rows as A against all-ones B, one sum(x) MMA per step instead of
# two), alternating twice: bench gemm bf16 M = 1,8,12,16, fp16 M = 12,16, bench moe M = 1..32;
# (3) the new binary's decode / full gemm / moe tables (imported if the change is kept).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== int4 rc=$?"; tail -n 1 $R/tests_int4.log
grep -m5 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -60
LOWBIT_INT4_DECODE_XSHARED=2 timeout 100 $T --gtest_brief=1 --gtest_filter='Forced/Int4Gemm*' > $R/tests_xs.log 2>&1; echo "== xs rc=$?"; tail -n 1 $R/tests_xs.log
LOWBIT_INT4_MOE_PIPE=0 timeout 60 $T --gtest_brief=1 --gtest_filter='*Moe*' > $R/tests_moe_decode.log 2>&1; echo "== moe_decode rc=$?"; tail -n 1 $R/tests_moe_decode.log
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$?"; tail -n 1 $R/tests_model.log
timeout 60 $B/lowbit_tests_gpu_codec --gtest_brief=1 > $R/tests_codec.log 2>&1; echo "== codec rc=$?"; tail -n 1 $R/tests_codec.log
timeout 60 $B/lowbit_example_int4_linear > $R/example.log 2>&1; echo "== example rc=$?"; tail -n 3 $R/example.log
tar -C $R -czf $OUT/results.tgz .
for rep in 1 2; do for v in new old; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --reps 10 --out $R/gemm_${v}_$rep > $R/gemm_${v}_$rep.log 2>&1; echo "== gemm_${v}_$rep rc=$?"
  timeout 60 $L bench gemm --m 12,16 --path skinny --dtype fp16 --reps 10 --out $R/gemm_fp16_${v}_$rep > $R/gemm_fp16_${v}_$rep.log 2>&1; echo "== gemm_fp16_${v}_$rep rc=$?"
  timeout 90 $L bench moe --m 1,8,16,32 --reps 10 --out $R/moe_${v}_$rep > $R/moe_${v}_$rep.log 2>&1; echo "== moe_${v}_$rep rc=$?"
done; done
tar -C $R -czf $OUT/results.tgz .  # (again at the end: what ran comes back if the call is cut short)
grep -h 'total #wrong' $R/*.log | sort | uniq -c
python3 - $R <<'PY'
import sys,glob
R=sys.argv[1]
def load(f):
    d={}; ti=None
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[2],c[3])]=float(c[ti])
            except: pass
    return d
for kind in ['gemm','gemm_fp16','moe']:
    n=[load(f'{R}/{kind}_new_{r}.md') for r in (1,2)]; o=[load(f'{R}/{kind}_old_{r}.md') for r in (1,2)]
    print('--',kind)
    for k in n[0]:
        try:
            a=min(x[k] for x in n); b=min(x[k] for x in o)
            print(f"{' '.join(k)}: new {a:.1f} old {b:.1f} ratio {a/b:.3f}")
        except Exception as e: pass
PY
# (3) the tables to import if the new kernel is kept (its binary, as docs/benchmarks/README says)
L=$B/lowbit
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "== gemm_decode rc=$?"
timeout 60 $L bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out $R/gemm_decode_fp16 > $R/gemm_decode_fp16.log 2>&1; echo "== gemm_decode_fp16 rc=$?"
timeout 120 $L bench gemm --out $R/gemm > $R/gemm.log 2>&1; echo "== gemm rc=$?"
timeout 100 $L bench moe --out $R/moe > $R/moe.log 2>&1; echo "== moe rc=$?"
grep -h 'total #wrong' $R/gemm_decode*.log $R/gemm.log $R/moe.log
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
