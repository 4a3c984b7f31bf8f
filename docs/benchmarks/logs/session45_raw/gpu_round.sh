#!/usr/bin/env bash
# Session 45's first call, binaries with session 44's two review mends (fused_moe checks a null
# workspace once before either path; bench moe resolves the path once after timing): the whole GPU
# int4 suite; on an H200 also `bench moe` (every shape and M) and the decode plan measurements
# session 44 left unrun (gpu_sweep3.sh): the PDL trigger point on 8b.qkv / 8b.o under the final
# plan, and 8b.o's 4-warp pairs against the plan at M = 1 / 2 / 4 / 8 in bf16 and fp16 (with
# 8b.down and 70b.o, the other shapes in 8-warp pairs, as the rule's boundary), three alternated passes.
# run(command="ONLY=H200 SUITE_ANYWAY=1 bash docs/benchmarks/logs/session45_raw/gpu_round.sh", carry=[".dev/s45a"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45a; R=$OUT/r; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv && [ -z "${SUITE_ANYWAY:-}" ]; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T whole GPU int4 suite"; timeout 200 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/gpu_int4.log | head -8; el
echo "OK $(grep -cE '^\[ +OK \] .*(MoeResolved|ActOrder|MoePipelinedWs|MoeGrouped)' $R/gpu_int4.log) FAILED $(grep -cE '^\[  FAILED  \] .*(MoeResolved|ActOrder|MoePipelinedWs|MoeGrouped)' $R/gpu_int4.log) (MoE resolution / grouped cases)"
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv; then echo "not an $ONLY: benches skipped"; cd $OUT && tar czf results.tgz r; exit 0; fi
echo "== M bench moe (all)"; timeout 150 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/moe.log; el
S=$OUT/s; mkdir -p $S
b() { local name=$1 shapes=$2 dt=$3 ms=$4; shift 4; env "$@" timeout 30 $B/lowbit bench gemm --shapes $shapes --dtype $dt --m $ms --path skinny --reps 5 --cooldown-ms 100 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
echo "== S plan sweep"
for pass in 1 2 3; do
  for dt in bf16 fp16; do
    b def_${dt}_$pass llama3-8b.qkv,llama3-8b.o,llama3-8b.down,llama3-70b.o $dt 1,2,4,8
    b o_w4s2_${dt}_$pass llama3-8b.o,llama3-8b.down,llama3-70b.o $dt 1,2,4,8 LOWBIT_INT4_DECODE_WARPS=4 LOWBIT_INT4_DECODE_SPLITS=2
  done
  for t in 0 1 2; do b trig${t}_$pass llama3-8b.qkv,llama3-8b.o bf16 1,8 LOWBIT_INT4_DECODE_TRIGGER=$t; done
done; el
grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf results.tgz r s
