#!/usr/bin/env bash
# Session 17 round GB: split-K push for clusters of 3 (dense 8-row tiles) and the plan's 4-warp
# clusters of 3 for 133..176 column groups (70b.qkv) at M <= 8.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 60 $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/push_test.log 2>&1; echo "push rc=$? $(( $(date +%s)-t0 ))s"; grep -E "OK|FAIL|PASSED|Failure|diff" $R/push_test.log | tail -8
timeout 120 compute-sanitizer --tool memcheck $B/lowbit_tests_gpu_int4 --gtest_filter='Int4GemmDecodePush*' > $R/push_memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|ERROR SUMMARY" $R/push_memcheck.log
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 90 $B/lowbit bench gemm --m 1,8,16 --path skinny --out $R/gemm_decode > $R/gemm_decode.log 2>&1; echo "decode rc=$? $(( $(date +%s)-t0 ))s"
S=llama3-70b.qkv
run() { local n=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 1,8 --path skinny --shapes $S $EXTRA --out $R/$n > $R/$n.log 2>&1; echo "$n rc=$?"; }
for v in "bf16:" "g32:--group 32" "g64:--group 64" "pc:--group -1" "asym:--asym" "fp16:--dtype fp16"; do
  n=${v%%:*}; EXTRA=${v#*:}
  run new_$n LOWBIT_X=1; run old_$n LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1
done
EXTRA=""; run loads_bf16 LOWBIT_INT4_DECODE_PUSH=0; run new2_bf16 LOWBIT_X=1
for f in new_bf16 old_bf16 loads_bf16 new2_bf16 new_g32 old_g32 new_g64 old_g64 new_pc old_pc new_asym old_asym new_fp16 old_fp16; do echo "== $f"; grep '^| llama' $R/$f.md | awk -F'|' '{print $2,$5,$8,$12,$16,$17}'; done
echo "== decode"; grep '^| llama' $R/gemm_decode.md | awk -F'|' '{print $2,$5,$8,$12,$16,$17}'
tar -C $R -czf $OUT/results.tgz .
