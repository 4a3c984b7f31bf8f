#!/usr/bin/env bash
# The GPU checks session 37 could not run (no device was lent): run them in one `run` call of
# the next session that gets an H200, then record the results and resolve what they verify.
#
# Stage first, on the build machine (the build must be current: rebuild if main moved):
#   cmake --build build -j2 --target lowbit_cli lowbit_tests_gpu_int4 lowbit_example_int4_moe lowbit_example_int4_linear
#   mkdir -p .dev/s37 && for b in lowbit lowbit_tests_gpu_int4 lowbit_example_int4_moe lowbit_example_int4_linear; do
#     strip -o .dev/s37/$b build/bin/$b && xz -T2 -f .dev/s37/$b; done
# then: run(command="bash docs/benchmarks/logs/session37_raw/next_gpu_round.sh", carry=[".dev/s37"])
#
# What each step verifies:
#  1. the whole GPU int4 suite, incl. Int4MoeCallerRouted (caller routing, d157c5c) and every
#     decode plan under b0f5b61 (the one-wave cluster check moved into schedulable_splits);
#  2. the MoE example end to end (sharded checkpoint -> convert --fuse-gate-up -> fused_moe with
#     caller routing) and the dense example;
#  3. b0f5b61 against session 36's round 8 (gemm_tp_shards.md): the TP shapes at M = 9..32;
#  4. what caller routing costs against the logits' routing (single-token path at M <= 4).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/s37
for f in $D/*.xz; do xz -d -T4 "$f"; done; chmod +x $D/*
R=$OUT/r; mkdir -p $R
echo "== 1 gpu int4"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo rc $?; tail -3 $R/gpu_int4.log
echo "== 2 examples"; for e in int4_moe int4_linear; do timeout 60 $D/lowbit_example_$e > $R/example_$e.log 2>&1; echo "$e rc $?"; tail -2 $R/example_$e.log; done
S=""
for t in tp2 tp4 tp8; do for p in qkv o gate_up down; do S="$S${S:+,}llama3-70b.$t.$p"; done; done
echo "== 3 tp shapes"; timeout 200 $D/lowbit bench gemm --shapes $S --m 1,9,12,16,24,32 --cooldown-ms 500 --out $R/gemm_tp_shards > $R/tp.log 2>&1; echo rc $?; grep -h "total #wrong" $R/tp.log
echo "== 4 routing"; for r in logits caller; do
  timeout 150 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --m 1,2,4,8,16,128 --routing $r --out $R/moe_routing_$r > $R/moe_$r.log 2>&1; echo "$r rc $?"; grep -h "total #wrong" $R/moe_$r.log; done
cd $OUT && tar czf results.tgz r
