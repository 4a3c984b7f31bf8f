#!/usr/bin/env bash
# Session 46's H200 round, binaries of 98b1304 (.dev/s45c/COMMIT; every later commit is docs): the
# whole GPU int4 suite; the issue's tables (`bench moe`, `bench gemm`, every shape and M) for the
# records of the final kernels; the small-expert single-token rule (M <= 8 where one expert's w13
# has <= 2 Mi elements) against the same binary held to the previous bound
# (LOWBIT_INT4_MOE_SINGLE_MAXM=4) on Qwen3-30B-A3B TP2 and Qwen3.5-35B-A3B at M = 1, 4..8, two
# alternated passes (session 45 timed it only on an H100).
# run(command="ONLY=H200 bash docs/benchmarks/logs/session46_raw/gpu_round.sh", carry=[".dev/s45c"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45c; R=$OUT/r; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv && [ -z "${SUITE_ANYWAY:-}" ]; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T whole GPU int4 suite"; timeout 150 $B/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/gpu_int4.log | head -8; el
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $R/gpu.csv; then echo "not an $ONLY: benches skipped"; cd $OUT && tar czf results.tgz r; exit 0; fi
echo "== M bench moe (all)"; timeout 150 $B/lowbit bench moe --out $R/moe > $R/moe.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/moe.log; el
echo "== G bench gemm (all)"; timeout 130 $B/lowbit bench gemm --cooldown-ms 300 --out $R/gemm > $R/gemm.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm.log; el
S=$OUT/n; mkdir -p $S
b() { local name=$1; shift; env "$@" timeout 40 $B/lowbit bench moe --shapes qwen3-30b-a3b.tp2,qwen3.5-35b-a3b --m 1,4,5,6,7,8 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
echo "== N single-token bound"
for pass in 1 2; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && { echo "out of time before pass $pass"; break; }
  b rule_$pass; b max4_$pass LOWBIT_INT4_MOE_SINGLE_MAXM=4
done; el
grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf results.tgz r n
