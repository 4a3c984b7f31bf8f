#!/usr/bin/env bash
# Session 46, second script (binaries in .dev/s46b, built at the commit in COMMIT: lowbit_marlin = the
# CLI built with -DLOWBIT_BENCH_VLLM_MARLIN=ON, and lowbit_tests_gpu_int4; the plain CLI stays home:
# the tracked tree leaves ~17 MiB to carry). The kernels are 98b1304's plus session 46's routing
# mend (3fc23f9: a missing pick of a token with NaN / -inf logits names expert 0 at weight 0), whose
# two GPU tests (Int4MoeRouting.NonFiniteLogits*) have not run yet.
# Any card first: those two tests under compute-sanitizer memcheck, then the whole GPU int4 suite.
# Then, on any card with the time left: `bench moe` on other models' layers through `--shapes ExHxIxTOPK` (new this session),
# with vLLM's fused_marlin_moe beside it: Qwen3-235B-A22B (128 x 4096 x 1536, top-8) at TP 1 and 4,
# GLM-4.5-Air (128 x 4096 x 1408, top-8), DeepSeek-V3 at TP 8 (256 x 7168 x 256, top-8; the 8
# routed experts, no shared expert, no group-limited routing), Mixtral-8x22B (8 x 6144 x 16384, top-2).
# On an H200 before those: the issue's MoE table (`bench moe`, now with the
# Marlin columns) and the small-expert single-token bound against LOWBIT_INT4_MOE_SINGLE_MAXM=4
# (gpu_round.sh's parts; `bench gemm` left out: the dense kernels are those of session 44's gemm.md).
# Stage (build machine): cmake -S . -B build-marlin -DCMAKE_BUILD_TYPE=Release -DLOWBIT_BENCH_VLLM_MARLIN=ON && cmake --build
# build-marlin --target lowbit_cli && cmake --build build --target lowbit_tests_gpu_int4; D=.dev/s46b; mkdir -p $D && strip -o
# $D/lowbit_marlin build-marlin/bin/lowbit && strip -o $D/lowbit_tests_gpu_int4 build/bin/lowbit_tests_gpu_int4 && xz -T2 -f $D/lowbit_*; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session46_raw/gpu_round2.sh", carry=[".dev/s46b"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s46b; R=$OUT/r; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
MODELS=128x4096x1536x8,128x4096x384x8,128x4096x1408x8,256x7168x256x8,8x6144x16384x2
L=$B/lowbit; [ -x $B/lowbit_marlin ] && L=$B/lowbit_marlin
models() { echo "== X bench moe, other models ($1, $L)"; timeout $2 $L bench moe --shapes $MODELS --m 1,8,32,128,512,2048 --out $R/moe_models > $R/moe_models.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/moe_models.log; el; }
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "== S the non-finite routing tests under memcheck"; timeout 120 $CS --tool memcheck --error-exitcode 9 $B/lowbit_tests_gpu_int4 --gtest_filter='Int4MoeRouting.NonFinite*' > $R/memcheck_nonfinite.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|ERROR SUMMARY" $R/memcheck_nonfinite.log | head -5; el
echo "== T whole GPU int4 suite"; timeout 150 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/gpu_int4.log | head -8; el
if grep -q H200 $R/gpu.csv; then
  echo "== M bench moe (all)"; timeout 200 $L bench moe --out $R/moe > $R/moe.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/moe.log; el
  S=$OUT/n; mkdir -p $S
  b() { local name=$1; shift; env "$@" timeout 50 $L bench moe --shapes qwen3-30b-a3b.tp2,qwen3.5-35b-a3b --m 1,4,5,6,7,8 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
  echo "== N single-token bound"
  for pass in 1 2; do
    [ $(( $(date +%s) - t0 )) -gt 450 ] && { echo "out of time before pass $pass"; break; }
    b rule_$pass; b max4_$pass LOWBIT_INT4_MOE_SINGLE_MAXM=4
  done; el
  grep -h "total #wrong" $S/*.log | sort | uniq -c
  left=$(( 585 - ($(date +%s) - t0) )); [ $left -gt 60 ] && models "what time is left" $left
  cd $OUT && tar czf results.tgz r n && rm -rf r n
else
  left=$(( 585 - ($(date +%s) - t0) )); [ $left -gt 60 ] && models "not an H200" $left
  cd $OUT && tar czf results.tgz r && rm -rf r
fi
