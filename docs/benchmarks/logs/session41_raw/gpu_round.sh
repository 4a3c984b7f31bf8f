#!/usr/bin/env bash
# Session 41's GPU checks (written while no device was lent; none of it has run yet). Stage on the
# build machine (build/ current with the commit under test):
#   cmake --build build -j2 --target lowbit_cli lowbit_tests_gpu_int4 lowbit_example_int4_moe
#   D=.dev/s41m; mkdir -p $D && for b in lowbit lowbit_tests_gpu_int4 lowbit_example_int4_moe; do
#     strip -o $D/$b build/bin/$b && xz -T2 -f $D/$b; done; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session41_raw/gpu_round.sh <part> <dir>", carry=["<dir>"])
# Part A (main): the act-order suites (with the fold's new checks: permuted columns bit for bit on
#   every dense path, the folded MoE layer bit-identical to the act-order one), the MoE example,
#   the whole GPU int4 suite, then the MoE layer plain / --act-order / --act-order-fold (what the
#   fold saves: w2's gather).
# Part G (main): bench gemm at M = 4096 / 8192 (the prefill target, not re-run since session 39), then
#   plain and --act-order at M = 1..512 (the single per-element gather kernel of 2f3a0bf).
# Parts K and S: branches sk64b and ao-single2 (sk64 and ao-single rebased onto main f51567d in
#   session 41; binaries in .dev/s41k, .dev/s41s), as session 40 planned the parts
#   (docs/benchmarks/logs/session40_raw/gpu_round.sh K|S <dir>).
# Part R (two GPUs: kind nvidia-h100-x2 / nvidia-h200-x2): branch ar-dedupe2 against main. <dir> holds
#   main/ and branch/, each with lowbit and lowbit_tests_multigpu_allreduce (xz; the branch built in a
#   worktree). The branch's multi-GPU all-reduce suite, then bench allreduce main / branch
#   alternating, twice (same sizes and modes as scripts/device/allreduce.sh's bench).
set -u
part=${1:-A}; D=${2:-.dev/s41m}
if [ "$part" = K ] || [ "$part" = S ]; then exec bash docs/benchmarks/logs/session40_raw/gpu_round.sh "$part" "$D"; fi
if [ "$part" = R ]; then
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
  R=$OUT/r; mkdir -p $R; nvidia-smi topo -m > $R/topo_R.txt 2>&1
  for v in main branch; do cat $D/$v/COMMIT > $R/commit_$v.txt 2>/dev/null; for f in $D/$v/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/$v/*; done
  echo "== R1 branch multi-GPU all-reduce suite"; timeout 90 $D/branch/lowbit_tests_multigpu_allreduce > $R/ar_tests_branch.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)" $R/ar_tests_branch.log
  for pass in 1 2; do for v in main branch; do
    echo "== R2 pass $pass bench $v"; timeout 70 $D/$v/lowbit bench allreduce --sizes 16K:1G --modes all --iters 5 --reps 3 --out $R/ar_${v}_$pass > $R/ar_${v}_$pass.log 2>&1; echo "rc $?"
  done; done
  cd $OUT && tar czf results_R.tgz r; exit 0
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r; mkdir -p $R
cat $D/COMMIT > $R/commit_$part.txt 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu_$part.csv 2>&1
for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
MOE_SHAPES=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b
if [ "$part" = A ]; then
  echo "== A1 act-order suites"; timeout 150 $D/lowbit_tests_gpu_int4 --gtest_filter='Paths/Int4MoeActOrder*:Int4MoeActOrder*:*Int4GemmActOrder*' > $R/act_order_$part.log 2>&1; echo rc $?; grep -E "FAILED|PASSED" $R/act_order_$part.log | head
  echo "== A2 MoE example"; timeout 60 $D/lowbit_example_int4_moe > $R/example_int4_moe_$part.log 2>&1; echo rc $?; tail -1 $R/example_int4_moe_$part.log
  echo "== A3 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_$part.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_$part.log
  for v in plain act fold; do
    flag=""; [ $v = act ] && flag=--act-order; [ $v = fold ] && flag=--act-order-fold
    echo "== A4 moe $v"; timeout 100 $D/lowbit bench moe --shapes $MOE_SHAPES --m 1,2,4,8,16,128 $flag --out $R/moe_${part}_$v > $R/moe_${part}_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/moe_${part}_$v.log
  done
elif [ "$part" = G ]; then
  echo "== G0 dense prefill M = 4096 / 8192 (the >= 0.8x cuBLAS target)"; timeout 150 $D/lowbit bench gemm --m 4096,8192 --cooldown-ms 300 --out $R/gemm_${part}_prefill > $R/gemm_${part}_prefill.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/gemm_${part}_prefill.log
  for v in plain act; do
    echo "== G1 dense $v"; timeout 150 $D/lowbit bench gemm --m 1,8,16,32,128,512 --cooldown-ms 300 $([ $v = act ] && echo --act-order) --out $R/gemm_${part}_$v > $R/gemm_${part}_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/gemm_${part}_$v.log
  done
fi
cd $OUT && tar czf results_$part.tgz r
