#!/usr/bin/env bash
# Session 14 round DB: top-k by per-lane sorted candidates + route block up to 1024 threads: tests, old vs new MoE bench, ncu route durations.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 200 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "FAILED|PASSED|Failure" $R/gpu_int4.log | head -12
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -1 $R/gpu_model.log
for rep in 1 2; do
  for v in new old; do
    exe=$B/lowbit; [ $v = old ] && exe=$B/lowbit_old
    t1=$(date +%s)
    timeout 150 $exe bench moe --m 1,2,4,8,12,16,32,64 --path fused --out $R/moe_${v}_r$rep > $R/moe_${v}_r$rep.log 2>&1; echo "bench $v rep $rep rc=$? $(( $(date +%s)-t1 ))s"
  done
done
for f in $R/moe_*_r*.md; do echo "--- $(basename $f)"; grep -E "^\| [a-z]" $f | awk -F'|' '{gsub(/ /,"",$2); printf "%s M%s %s; ", substr($2,1,9), $5, $7}'; echo; done
NCU=/usr/local/cuda/bin/ncu
for v in new old; do
  exe=$B/lowbit; [ $v = old ] && exe=$B/lowbit_old
  for m in 1 8 16 64; do
    k='regex:moe_route|gemm_decode'; [ $m = 1 ] && k='regex:gemm_decode'
    timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -k "$k" --launch-skip 20 --launch-count 6 $exe bench moe --m $m --path fused --reps 3 --shapes qwen3-30b-a3b.tp2 > $R/ncu_${v}_m$m.log 2>&1
    echo "ncu $v m=$m rc=$?: $(grep -E '^  [a-zA-Z_ ]*(void|unnamed|lowbit)|gpu__time_duration' $R/ncu_${v}_m$m.log | sed -E 's/\(.*//; s/ +/ /g' | tr '\n' ' ' | cut -c1-900)"
  done
done
tar -C $R -czf $OUT/results.tgz .
