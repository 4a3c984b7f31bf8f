#!/usr/bin/env bash
# Session 59: the streaming limit of one launch (stream_limit.cu) beside the dense decode kernel on the
# small Llama-3-8B shapes, one device call on any card: stream_limit's table, then `lowbit bench gemm`
# (HEAD's GPU code, 5a634b0) on 8B o / qkv / down / gate_up at M = 1, 8, 16 with the read_us reference,
# by the default plan and with LOWBIT_INT4_DECODE_TRIGGER=0 (the next launch may start at the kernel's start).
# Stage (here): the build command in stream_limit.cu's header, -o .dev/stream_limit; mkdir -p .dev/s59p;
# strip -o .dev/s59p/stream_limit .dev/stream_limit; cp .dev/s58x/* .dev/s59p/ (the CLI at 5a634b0, COMMIT).
# On an H200 (and with .dev/s58i carried) the GPU int4 suite at HEAD's GPU code runs first.
# run(command="bash docs/benchmarks/logs/session59_raw/gpu_stream.sh", carry=[".dev/s59p", ".dev/s58i"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s59p; S=$OUT/s; mkdir -p $S
nvidia-smi -L | tee $S/gpu.txt
if grep -q H200 $S/gpu.txt && [ -d .dev/s58i ]; then BIN=.dev/s58i bash docs/benchmarks/logs/session53_raw/gpu_tests.sh; fi
cat $B/COMMIT > $S/commit.txt
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
timeout 120 $B/stream_limit | tee $S/stream_limit.md
SH=llama3-8b.o,llama3-8b.qkv,llama3-8b.down,llama3-8b.gate_up
timeout 100 $B/lowbit bench gemm --shapes $SH --m 1,8,16 --dtype bf16 --reps 10 --cooldown-ms 300 --out $S/gemm > $S/gemm.log 2>&1 || echo "gemm rc $?"
LOWBIT_INT4_DECODE_TRIGGER=0 timeout 100 $B/lowbit bench gemm --shapes $SH --m 1,8,16 --dtype bf16 --reps 10 --cooldown-ms 300 --out $S/gemm_trig0 > $S/gemm_trig0.log 2>&1 || echo "trig0 rc $?"
grep -h "total #wrong\|^| llama" $S/gemm.md $S/gemm_trig0.md 2>/dev/null | cut -c1-400
(cd $OUT && tar czf stream.tgz s)
