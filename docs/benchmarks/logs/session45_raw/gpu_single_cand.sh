#!/usr/bin/env bash
# Session 45's last device call: binaries of the small-expert single-token rule (M <= 8 where one
# expert's w13 has <= 2 Mi elements; .dev/s45c/COMMIT): the GPU int4 suite's MoE cases, then the
# rule against the same binary held to the previous bound (LOWBIT_INT4_MOE_SINGLE_MAXM=4) on
# Qwen3-30B-A3B TP2 and Qwen3.5-35B-A3B at M = 1, 4..8, two alternated passes.
# run(command="bash docs/benchmarks/logs/session45_raw/gpu_single_cand.sh", carry=[".dev/s45c"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45c; S=$OUT/n; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
echo "== MoE cases"; timeout 150 $B/lowbit_tests_gpu_int4 --gtest_filter='*Moe*:*MoE*' > $S/gpu_int4_moe.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED)|tests ran" $S/gpu_int4_moe.log | head -8; echo "  [$(( $(date +%s) - t0 )) s]"
b() { local name=$1; shift; env "$@" timeout 60 $B/lowbit bench moe --shapes qwen3-30b-a3b.tp2,qwen3.5-35b-a3b --m 1,4,5,6,7,8 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2; do b rule_$pass; b max4_$pass LOWBIT_INT4_MOE_SINGLE_MAXM=4; done
echo "  [$(( $(date +%s) - t0 )) s]"; grep -h "total #wrong" $S/*.log | sort | uniq -c
cd $OUT && tar czf single_cand.tgz n
