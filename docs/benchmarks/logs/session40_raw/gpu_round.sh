#!/usr/bin/env bash
# Session 40's GPU checks. Stage on the build machine (build/ current with the commit under test):
#   cmake --build build -j2 --target lowbit_cli lowbit_tests_gpu_int4 lowbit_example_int4_moe
#   D=.dev/s40a; mkdir -p $D && for b in lowbit lowbit_tests_gpu_int4 lowbit_example_int4_moe; do
#     strip -o $D/$b build/bin/$b && xz -T2 -f $D/$b; done
# run(command="bash docs/benchmarks/logs/session40_raw/gpu_round.sh <part> <dir>", carry=["<dir>"])
# Part K: branch sk64's stream-K on the 64-row tiles (stage its binaries in another dir).
# Part S: branch ao-single's act-order MoE on the single-token path (likewise).
# Part A: the act-order suites (with session 39's unrun cases), the MoE example, the whole GPU int4
#   suite, then what act-order costs (bench gemm / moe, plain and --act-order).
set -u
part=${1:-A}; D=${2:-.dev/s40a}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu_$part.csv 2>&1
for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
MOE_SHAPES=qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b
if [ "$part" = A ]; then
  echo "== A1 act-order suites"; timeout 150 $D/lowbit_tests_gpu_int4 --gtest_filter='Paths/Int4MoeActOrder*:Int4MoeActOrder*:*Int4GemmActOrder*' > $R/act_order_$part.log 2>&1; echo rc $?; grep -E "FAILED|PASSED" $R/act_order_$part.log | head
  echo "== A2 MoE example"; timeout 60 $D/lowbit_example_int4_moe > $R/example_int4_moe_$part.log 2>&1; echo rc $?; tail -1 $R/example_int4_moe_$part.log
  echo "== A3 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_$part.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_$part.log
  for v in plain act; do
    echo "== A4 dense $v"; timeout 150 $D/lowbit bench gemm --m 1,8,16,32,128,512 --cooldown-ms 300 $([ $v = act ] && echo --act-order) --out $R/gemm_${part}_$v > $R/gemm_${part}_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/gemm_${part}_$v.log
    echo "== A5 moe $v"; timeout 150 $D/lowbit bench moe --shapes $MOE_SHAPES --m 1,2,3,4,8,16,128 $([ $v = act ] && echo --act-order) --out $R/moe_${part}_$v > $R/moe_${part}_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/moe_${part}_$v.log
  done
elif [ "$part" = K ]; then
  # Part K: branch sk64 (binaries of its head in <dir>): stream-K on the 64-row tiles too. Its
  # test and the whole suite, then 70b.gate_up (the shape whose plan it changes at M = 49..64)
  # with stream-K on (the rule) and off (LOWBIT_INT4_PIPE_SK=0), two alternating passes; M = 32 / 48
  # (the 32-bit run change on the verified tiles) and 8b.gate_up / 70b.down as controls.
  echo "== K1 stream-K test"; timeout 120 $D/lowbit_tests_gpu_int4 --gtest_filter='Int4PipelinedStreamK*' > $R/sk_test_$part.log 2>&1; echo rc $?; grep -E "FAILED|PASSED" $R/sk_test_$part.log | head
  echo "== K2 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_$part.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_$part.log
  for pass in 1 2; do for v in on off; do
    echo "== K3 pass $pass stream-K $v"
    ( [ $v = off ] && export LOWBIT_INT4_PIPE_SK=0; timeout 120 $D/lowbit bench gemm --shapes llama3-70b.gate_up,llama3-8b.gate_up,llama3-70b.down --m 32,48,49,56,64 --cooldown-ms 300 --out $R/gemm_sk64_${v}_$pass > $R/gemm_sk64_${v}_$pass.log 2>&1; echo "rc $?" ); grep -h "total #wrong" $R/gemm_sk64_${v}_$pass.log
  done; done
elif [ "$part" = S ]; then
  # Part S: branch ao-single (binaries of its head in <dir>): act-order MoE experts on the
  # single-token path at M x topk <= 8. The act-order suites (with its two new cases), the whole
  # suite, then the act-order MoE bench against the plain one at M = 1..8 (same binaries), twice.
  echo "== S1 act-order suites"; timeout 150 $D/lowbit_tests_gpu_int4 --gtest_filter='Paths/Int4MoeActOrder*:Int4MoeActOrder*:*Int4GemmActOrder*' > $R/act_order_$part.log 2>&1; echo rc $?; grep -E "FAILED|PASSED" $R/act_order_$part.log | head
  echo "== S2 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_$part.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_$part.log
  for pass in 1 2; do for v in plain act; do
    echo "== S3 pass $pass moe $v"; timeout 150 $D/lowbit bench moe --shapes $MOE_SHAPES --m 1,2,3,4,8 $([ $v = act ] && echo --act-order) --out $R/moe_${part}_${v}_$pass > $R/moe_${part}_${v}_$pass.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/moe_${part}_${v}_$pass.log
    echo "== S4 pass $pass moe $v caller"; timeout 150 $D/lowbit bench moe --shapes $MOE_SHAPES --m 1,2 --routing caller $([ $v = act ] && echo --act-order) --out $R/moe_${part}_${v}_caller_$pass > $R/moe_${part}_${v}_caller_$pass.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/moe_${part}_${v}_caller_$pass.log
  done; done
fi
cd $OUT && tar czf results_$part.tgz r
