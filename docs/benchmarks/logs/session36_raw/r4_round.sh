#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r4c
xz -d -T4 $D/lowbit.xz $D/lowbit_tests_gpu_int4.xz && chmod +x $D/lowbit $D/lowbit_tests_gpu_int4
R=$OUT/r; mkdir -p $R
echo "== tp shards"; timeout 60 $D/lowbit_tests_gpu_int4 --gtest_filter='*TpShards*' > $R/tp.log 2>&1; echo rc $?; tail -3 $R/tp.log
echo "== tp shards, decode tile MoE"; LOWBIT_INT4_MOE_PIPE=0 timeout 60 $D/lowbit_tests_gpu_int4 --gtest_filter='*TpShards*:*FusedMoe*' --gtest_brief=1 > $R/tp_dec.log 2>&1; echo rc $?; tail -3 $R/tp_dec.log
echo "== gpu int4 all"; timeout 200 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo rc $?; tail -3 $R/gpu_int4.log
echo "== bench moe"; timeout 200 $D/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo rc $?; grep -h "total #wrong\|no Marlin\|w2 at" $R/moe.log
cd $OUT && tar czf results.tgz r
