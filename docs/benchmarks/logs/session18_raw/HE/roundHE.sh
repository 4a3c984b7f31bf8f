#!/usr/bin/env bash
# Session 18 round HE (binaries of the pipelined plan's 64-step rule): the int4 suite, the
# medium-M tables of scripts/device/int4.sh (gemm_medium, gemm_medium_mma), and the new rule
# against 8 ranks (the old plan for K = 4096) on 8b.qkv / 8b.o, wgmma and mma.sync tiles.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
timeout 150 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo "int4 rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $R/gpu_int4.log
timeout 90 $B/lowbit bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto --path auto,skinny,pipelined,cublas --reps 5 --out $R/gemm_medium > $R/bench_gemm_medium.log 2>&1; echo "medium rc=$? $(( $(date +%s)-t0 ))s"
LOWBIT_INT4_PIPE_WGMMA=0 timeout 60 $B/lowbit bench gemm --m 24,32,48,64,96,128,192,256,384,512 --layout auto --path pipelined --reps 5 --out $R/gemm_medium_mma > $R/bench_gemm_medium_mma.log 2>&1; echo "medium_mma rc=$? $(( $(date +%s)-t0 ))s"
grep -h "total #wrong" $R/bench_gemm_medium*.log
S=llama3-8b.qkv,llama3-8b.o
b() { local n=$1; shift; env "$@" timeout 40 $B/lowbit bench gemm --m 33,48,64 --path pipelined --shapes $S --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(grep '^| llama' $R/$n.md | awk -F'|' '{printf "%s/%s %s  ", $2,$5,$8}' | sed 's/llama3-//g')"; }
for rep in 1 2; do
  b new_wg$rep LOWBIT_X=1; b s8_wg$rep LOWBIT_INT4_PIPE_SPLITS=8
  b new_mma$rep LOWBIT_INT4_PIPE_WGMMA=0; b s8_mma$rep LOWBIT_INT4_PIPE_WGMMA=0 LOWBIT_INT4_PIPE_SPLITS=8
done
echo "elapsed $(( $(date +%s)-t0 ))s"
tar -C $R -czf $OUT/results.tgz .
