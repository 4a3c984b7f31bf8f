#!/usr/bin/env bash
# Session 29 round TE: the dense decode kernel's PDL trigger, the plan against "after the K loop"
# (LOWBIT_INT4_DECODE_TRIGGER=2), all eight projections at M = 1 / 8 / 16, alternated twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
for pass in 1 2; do for trig in plan 2; do
  if [ $trig = plan ]; then unset LOWBIT_INT4_DECODE_TRIGGER; else export LOWBIT_INT4_DECODE_TRIGGER=$trig; fi
  timeout 60 $B/lowbit bench gemm --m 1,8,12,16 --shapes $S --reps 7 --cooldown-ms 100 --out $R/trig${trig}_$pass > $R/trig${trig}_$pass.log 2>&1; echo "== trig=$trig pass$pass rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/trig${trig}_$pass.log)"
  tar -C $R -czf $OUT/results.tgz .
done; done
