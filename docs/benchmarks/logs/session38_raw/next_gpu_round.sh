#!/usr/bin/env bash
# The GPU checks of sessions 37 and 38 (no device was lent to either): run them in two `run`
# calls of the next session that gets an H200, then record the results and resolve what they
# verify. Supersedes session37_raw/next_gpu_round.sh (its steps are part A here).
#
# Stage first, on the build machine (a build with -DLOWBIT_BENCH_VLLM_MARLIN=ON and
# -DLOWBIT_BENCH_VLLM_MACHETE=ON, current with main: rebuild if main moved):
#   cmake --build build -j2 --target lowbit_cli lowbit_tests_gpu_int4 lowbit_example_int4_moe lowbit_example_int4_linear
#   mkdir -p .dev/s38 && for b in lowbit lowbit_tests_gpu_int4 lowbit_example_int4_moe lowbit_example_int4_linear; do
#     strip -o .dev/s38/$b build/bin/$b && xz -T2 -f .dev/s38/$b; done
# then: run(command="bash docs/benchmarks/logs/session38_raw/next_gpu_round.sh A", carry=[".dev/s38"])
# and likewise with B, then C (each part fits one call's 600 s).
#
# Part A (~6 min), what each step verifies:
#  1. the whole GPU int4 suite, incl. Int4MoeCallerRouted (caller routing, d157c5c) and every
#     decode plan under b0f5b61 (the one-wave cluster check moved into schedulable_splits);
#  2. the MoE example end to end (sharded checkpoint -> convert --fuse-gate-up -> fused_moe with
#     caller routing) and the dense example;
#  3. b0f5b61 against session 36's round 8 (gemm_tp_shards.md): the TP shapes at M = 9..32;
#  4. what caller routing costs against the logits' routing (single-token path at M <= 4).
# Part B (~6 min): vLLM's Machete (a13fc32; its first W4A16 choice on Hopper) beside lowbit and
#  Marlin on the eight Llama-3 projections, bf16, M = 1..8192 (the rows; its first run:
#  #wrong_mc says whether the conversion and the torch stand-in are right).
# Part C (~4 min): the same in fp16 at M <= 128, and on the TP shapes at M = 1..128.
# Parts A, B and C ran on 2026-12-05 (results_{A,B,C}.tgz here). Still to run: part D, the
# set-aside single-token caller-routing patch (session37_raw/single_path_caller_ids.patch): apply it,
# build lowbit_cli and lowbit_tests_gpu_int4, stage them in .dev/s38p (strip + xz, as above), revert
# the patch, then run(command="bash docs/benchmarks/logs/session38_raw/next_gpu_round.sh D",
# carry=[".dev/s38p"]) and compare moe_patch_caller with moe_patch_logits (and with
# moe_routing_caller.md of part A: 1.08-1.32x the logits' time at M = 1..2 without the patch).
set -u
part=${1:-A}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
D=.dev/s38
for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu_$part.csv 2>&1
if [ "$part" = A ]; then
  echo "== 1 gpu int4"; timeout 200 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo rc $?; tail -3 $R/gpu_int4.log
  echo "== 2 examples"; for e in int4_moe int4_linear; do timeout 60 $D/lowbit_example_$e > $R/example_$e.log 2>&1; echo "$e rc $?"; tail -2 $R/example_$e.log; done
  S=""
  for t in tp2 tp4 tp8; do for p in qkv o gate_up down; do S="$S${S:+,}llama3-70b.$t.$p"; done; done
  echo "== 3 tp shapes"; timeout 150 $D/lowbit bench gemm --shapes $S --m 1,9,12,16,24,32 --cooldown-ms 500 --out $R/gemm_tp_shards > $R/tp.log 2>&1; echo rc $?; grep -h "total #wrong\|no Machete" $R/tp.log | head -5
  echo "== 4 routing"; for r in logits caller; do
    timeout 80 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite --m 1,2,4,8,16,128 --routing $r --out $R/moe_routing_$r > $R/moe_$r.log 2>&1; echo "$r rc $?"; grep -h "total #wrong" $R/moe_$r.log; done
elif [ "$part" = B ]; then
  echo "== B machete bf16"; timeout 540 $D/lowbit bench gemm --out $R/gemm_vs_machete > $R/machete_bf16.log 2>&1; echo rc $?; grep -h "total #wrong\|no Machete" $R/machete_bf16.log | head -8
elif [ "$part" = D ]; then
  D=.dev/s38p
  for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
  echo "== D1 gpu int4 (patched)"; timeout 200 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_patch.log 2>&1; echo rc $?; tail -2 $R/gpu_int4_patch.log
  for r in logits caller; do
    echo "== D2 $r"; timeout 100 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b --m 1,2,3,4,8 --routing $r --out $R/moe_patch_$r > $R/moe_patch_$r.log 2>&1; echo "$r rc $?"; grep -h "total #wrong" $R/moe_patch_$r.log; done
else
  echo "== C1 machete fp16"; timeout 200 $D/lowbit bench gemm --dtype fp16 --m 1,8,16,32,128 --cooldown-ms 1000 --out $R/gemm_vs_machete_fp16 > $R/machete_fp16.log 2>&1; echo rc $?; grep -h "total #wrong\|no Machete" $R/machete_fp16.log | head -8
  S=""
  for t in tp2 tp4 tp8; do for p in qkv o gate_up down; do S="$S${S:+,}llama3-70b.$t.$p"; done; done
  echo "== C2 machete tp shapes"; timeout 300 $D/lowbit bench gemm --shapes $S --m 1,16,32,128 --cooldown-ms 500 --out $R/gemm_tp_vs_machete > $R/machete_tp.log 2>&1; echo rc $?; grep -h "total #wrong\|no Machete" $R/machete_tp.log | head -8
fi
cd $OUT && tar czf results_$part.tgz r
