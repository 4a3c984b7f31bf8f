#!/usr/bin/env bash
# Session 29 round TC: timelines of the dense decode GEMM (trace build: lowbit_trace) on the
# small projections at M = 1 / 16, the plan's PDL trigger and the trigger forced to the kernel's
# start / after the first batch; the same three in the plain binary for times.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R/trace
t0=$(date +%s)
S=llama3-8b.o,llama3-8b.qkv,llama3-8b.down,llama3-70b.o
for trig in plan 0 1; do
  if [ $trig = plan ]; then unset LOWBIT_INT4_DECODE_TRIGGER; else export LOWBIT_INT4_DECODE_TRIGGER=$trig; fi
  timeout 60 $B/lowbit bench gemm --m 1,8,16 --shapes $S --reps 7 --cooldown-ms 100 --out $R/plain_$trig > $R/plain_$trig.log 2>&1; echo "== plain trig=$trig rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/plain_$trig.log)"
  LOWBIT_INT4_TRACE_OUT=$R/trace/t$trig timeout 60 $B/lowbit_trace bench gemm --m 1,16 --shapes $S --reps 7 --cooldown-ms 100 --out $R/trace_$trig > $R/trace_$trig.log 2>&1; echo "== trace trig=$trig rc=$? $(( $(date +%s)-t0 ))s $(grep 'total #wrong' $R/trace_$trig.log)"
  tar -C $R -czf $OUT/results.tgz .
done
unset LOWBIT_INT4_DECODE_TRIGGER
ls $R/trace | head -30
