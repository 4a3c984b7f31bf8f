#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/r1c
cd $D && xz -d -T4 lowbit_base.xz lowbit_deep.xz && chmod +x lowbit_base lowbit_deep && cd - >/dev/null
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
for i in 1 2; do
  for v in base deep; do
    echo "== gemm $v $i"; timeout 120 $D/lowbit_$v bench gemm --m 17,24,32,40,48,56,64 --path pipelined --out $R/g_${v}_$i > $R/g_${v}_$i.log 2>&1; echo rc $?
  done
done
for i in 1 2; do
  for v in base deep; do
    echo "== moe $v $i"; timeout 120 $D/lowbit_$v bench moe --m 32,64,128,256,512 --out $R/m_${v}_$i > $R/m_${v}_$i.log 2>&1; echo rc $?
  done
done
echo "== full gemm base"; timeout 150 $D/lowbit_base bench gemm --out $R/full_gemm > $R/full_gemm.log 2>&1; echo rc $?
echo "== full moe base"; timeout 150 $D/lowbit_base bench moe --out $R/full_moe > $R/full_moe.log 2>&1; echo rc $?
grep -h "total #wrong" $R/*.md
cd $OUT && tar czf results.tgz r
