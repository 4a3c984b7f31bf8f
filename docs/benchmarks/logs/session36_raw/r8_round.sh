#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r8c
for f in $D/*.xz; do xz -d -T4 $f; done; chmod +x $D/lowbit*
R=$OUT/r; mkdir -p $R
S=""
for t in tp2 tp4 tp8; do for p in qkv o gate_up down; do S="$S${S:+,}llama3-70b.$t.$p"; done; done
echo "== tp shapes auto"; timeout 240 $D/lowbit bench gemm --shapes $S --m 1,8,9,12,16,17,24,32,128,512 --cooldown-ms 500 --out $R/gemm_tp_shards > $R/tp.log 2>&1; echo rc $?; grep -h "total #wrong" $R/tp.log
echo "== std shapes auto M=9..32"; timeout 120 $D/lowbit bench gemm --m 9,12,16,24,32 --cooldown-ms 500 --out $R/std_9_32 > $R/std.log 2>&1; echo rc $?; grep -h "total #wrong" $R/std.log
echo "== gpu int4"; timeout 200 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo rc $?; tail -2 $R/gpu_int4.log
cd $OUT && tar czf results.tgz r
