#!/usr/bin/env bash
# Session 17 round GD: x fragment sets alternated over pairs of batches (no per-batch copy) vs
# ad34d48 (lowbit_old), same run, twice; int4 GPU suite; fp16 70b.qkv plan check.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
for i in 1 2; do for v in old new; do
  L=$B/lowbit; [ $v = old ] && L=$B/lowbit_old
  timeout 90 $L bench gemm --m 1,8,12,16 --path skinny --out $R/dec_${v}_$i > $R/dec_${v}_$i.log 2>&1; echo "dec $v $i rc=$?"
  timeout 90 $L bench gemm --m 1,8,12,16 --path skinny --dtype fp16 --out $R/dec16_${v}_$i > $R/dec16_${v}_$i.log 2>&1; echo "dec16 $v $i rc=$?"
  timeout 120 $L bench moe --m 1,8,16,32 --out $R/moe_${v}_$i > $R/moe_${v}_$i.log 2>&1; echo "moe $v $i rc=$? $(( $(date +%s)-t0 ))s"
done; done
LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1 timeout 60 $B/lowbit bench gemm --m 1,2,4,8 --path skinny --shapes llama3-70b.qkv --dtype fp16 --out $R/q16_w8s1 > $R/q16_w8s1.log 2>&1
timeout 60 $B/lowbit bench gemm --m 1,2,4,8 --path skinny --shapes llama3-70b.qkv --dtype fp16 --out $R/q16_new > $R/q16_new.log 2>&1
for f in q16_w8s1 q16_new; do echo "== $f $(grep '^| llama' $R/$f.md | awk -F'|' '{printf "M%s %s/%s  ", $5,$8,$16}')"; done
python3 - $R <<'PY'
import json,sys,os
R=sys.argv[1]
def load(n):
    d=json.load(open(f"{R}/{n}.json")); rows=d.get('rows',d) if isinstance(d,dict) else d
    return {(r['shape'],r['M']):r for r in rows}
for kind in ['dec','dec16','moe']:
    o1,n1,o2,n2=[load(f"{kind}_{v}_{i}") for i in (1,2) for v in ('old','new')][0:4] if False else (load(f"{kind}_old_1"),load(f"{kind}_new_1"),load(f"{kind}_old_2"),load(f"{kind}_new_2"))
    print("==",kind,"shape M old1 new1 old2 new2 (time_us) new/old")
    for k in o1:
        t=[x[k]['time_us'] for x in (o1,n1,o2,n2)]
        print(f"{k[0]:22s} {k[1]:5d} "+" ".join(f"{v:7.1f}" for v in t)+f"  {(t[1]+t[3])/(t[0]+t[2]):.3f}  wrong={n1[k].get('wrong',n1[k].get('n_wrong','?'))}")
PY
tar -C $R -czf $OUT/results.tgz .
