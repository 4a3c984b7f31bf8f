#!/usr/bin/env bash
# Session 19 round ID (binaries d013e2d: DeviceWeights State, kFull tiles always loading x
# ahead): the GPU int4 and model suites, then the tables the decode tile feeds (gemm_decode,
# gemm_decode_fp16, gemm, moe), as scripts/device/int4.sh writes them.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$?"; tail -n 1 $R/gpu_int4.log
timeout 60 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/gpu_model.log 2>&1; echo "model rc=$?"; tail -n 1 $R/gpu_model.log
echo "[$(( $(date +%s)-t0 ))s]"
timeout 60 $B/lowbit bench gemm --m 1,8,12,16 --layout auto --path skinny --out $R/gemm_decode > $R/bench_decode.log 2>&1; echo "decode rc=$?"
timeout 60 $B/lowbit bench gemm --m 1,8,12,16 --layout auto --path skinny --dtype fp16 --out $R/gemm_decode_fp16 > $R/bench_decode_fp16.log 2>&1; echo "decode_fp16 rc=$?"
timeout 90 $B/lowbit bench gemm --out $R/gemm > $R/bench_gemm.log 2>&1; echo "gemm rc=$?"
timeout 150 $B/lowbit bench moe --out $R/moe > $R/bench_moe.log 2>&1; echo "moe rc=$?"
grep -h "total #wrong" $R/bench_*.log | sort | uniq -c
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
