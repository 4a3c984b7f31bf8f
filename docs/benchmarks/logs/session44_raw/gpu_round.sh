#!/usr/bin/env bash
# Session 44's first call: the whole GPU int4 suite and the MoE example at the commit in
# .dev/s44c/COMMIT (1eaa50c's act-order reference computed once, moe_resolved() with its checks);
# then, on an H200 only,
# the tables (bench gemm / bench moe, every shape and M, fp16 decode too) and the decode
# plan's warps x split-K leads of session 43 (gpu_sweep2's runs, three alternating passes).
# run(command="ONLY=H200 bash docs/benchmarks/logs/session44_raw/gpu_round.sh", carry=[".dev/s44c"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s44c; R=$OUT/r; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
# ONLY=H200: stop at once on another card, or with SUITE_ANYWAY=1 run the suite there and stop after it.
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv && [ -z "${SUITE_ANYWAY:-}" ]; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T whole GPU int4 suite"; timeout 200 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/gpu_int4.log | head -8; el
echo "== A act-order tiles"; grep -h "GEMM1 tiles" $R/gpu_int4.log | sort | uniq -c; echo "OK $(grep -cE '^\[ +OK \] .*(MoeResolved|ActOrder|MoePipelinedWs)' $R/gpu_int4.log) FAILED $(grep -cE '^\[  FAILED  \] .*(MoeResolved|ActOrder|MoePipelinedWs)' $R/gpu_int4.log)"
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv; then echo "not an $ONLY: benches skipped"; cd $OUT && tar czf results.tgz r; exit 0; fi
if [ -e $B/lowbit_example_int4_moe ]; then echo "== E MoE example"; timeout 60 $B/lowbit_example_int4_moe > $R/example_int4_moe.log 2>&1; echo rc $?; tail -1 $R/example_int4_moe.log; el; fi  # (left behind when the candidate travels: 64 MiB)
echo "== G bench gemm (all)"; timeout 120 $B/lowbit bench gemm --cooldown-ms 300 --out $R/gemm > $R/gemm.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm.log; el
echo "== F bench gemm fp16 decode"; timeout 60 $B/lowbit bench gemm --dtype fp16 --m 1,8,16 --cooldown-ms 300 --out $R/gemm_decode_fp16 > $R/gemm_decode_fp16.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm_decode_fp16.log; el
echo "== M bench moe (all)"; timeout 120 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/moe.log; el
S=$OUT/s; mkdir -p $S; SH=llama3-8b.qkv,llama3-8b.o,llama3-8b.down
b() { timeout 40 $B/lowbit bench gemm --shapes $SH --m 1,8 --path skinny --reps 5 --cooldown-ms 100 --out $S/$1 > $S/$1.log 2>&1 || echo "$1 rc $?"; }
echo "== S sweep"
for pass in 1 2 3; do
  b def_$pass
  for ws in 8:1 4:1 4:2 4:3 8:3 8:4; do LOWBIT_INT4_DECODE_WARPS=${ws%:*} LOWBIT_INT4_DECODE_SPLITS=${ws#*:} b w${ws%:*}s${ws#*:}_$pass; done
  LOWBIT_INT4_DECODE_TRIGGER=1 b trig1_$pass
done; el
# The candidate plan (branch plan-qkv: 8b.qkv's 8-warp blocks alone at M <= 8), alternated with the
# default binary, bf16 and fp16, M = 1 / 8 / 16 on every dense shape.
C=$OUT/c; mkdir -p $C
if [ -x $B/lowbit_cand ]; then echo "== C candidate plan"
  for pass in 1 2; do for bin in lowbit lowbit_cand; do for dt in bf16 fp16; do
    timeout 40 $B/$bin bench gemm --dtype $dt --m 1,8,16 --path skinny --reps 5 --cooldown-ms 100 --out $C/${bin}_${dt}_$pass > $C/${bin}_${dt}_$pass.log 2>&1 || echo "$bin $dt rc $?"
  done; done; done; el
fi
cd $OUT && tar czf results.tgz r s c
