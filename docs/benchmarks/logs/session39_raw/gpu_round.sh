#!/usr/bin/env bash
# Session 39's GPU checks. Stage on the build machine (build/ current with main):
#   cmake --build build -j2 --target lowbit_tests_gpu_int4 lowbit_example_int4_moe
#   mkdir -p .dev/s39 && for b in lowbit_tests_gpu_int4 lowbit_example_int4_moe; do
#     strip -o .dev/s39/$b build/bin/$b && xz -T2 -f .dev/s39/$b; done
# Part A: run(command="bash docs/benchmarks/logs/session39_raw/gpu_round.sh A", carry=[".dev/s39"])
#   1. the MoE act-order suite (Int4MoeActOrder) and its neighbours, then the whole GPU int4 suite.
# Part D: session 38's part D (the single-token caller-routing patch, binaries in .dev/s38p):
#   run(command="bash docs/benchmarks/logs/session39_raw/gpu_round.sh D", carry=[".dev/s38p"])
set -u
part=${1:-A}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu_$part.csv 2>&1
if [ "$part" = A ]; then
  D=.dev/s39
  for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
  echo "== A1 act-order suites"
  timeout 150 $D/lowbit_tests_gpu_int4 --gtest_filter='Paths/Int4MoeActOrder*:Int4MoeActOrder*:*Int4GemmActOrder*' > $R/act_order.log 2>&1; echo rc $?
  grep -E "FAILED|Failure|error|PASSED" $R/act_order.log | head -30
  echo "== A1b MoE example (desc_act checkpoint)"; timeout 60 $D/lowbit_example_int4_moe > $R/example_int4_moe.log 2>&1; echo rc $?; tail -3 $R/example_int4_moe.log
  echo "== A2 gpu int4 (all)"
  timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4.log 2>&1; echo rc $?; tail -4 $R/gpu_int4.log
elif [ "$part" = B ]; then
  # Part B: the caller-routing patch applied on main (binaries of the commit after 6cf568f's
  # act-order work, staged in .dev/s39b with lowbit too): the whole suite, the MoE example, and
  # what caller routing costs against the logits' routing now.
  D=.dev/s39b
  for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
  echo "== B1 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_b.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_b.log
  echo "== B2 MoE example"; timeout 60 $D/lowbit_example_int4_moe > $R/example_int4_moe_b.log 2>&1; echo rc $?; tail -1 $R/example_int4_moe_b.log
  for r in logits caller; do
    echo "== B3 $r"; timeout 150 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b --m 1,2,3,4,8,16,128 --routing $r --out $R/moe_routing_$r > $R/moe_b_$r.log 2>&1; echo "$r rc $?"; grep -h "total #wrong" $R/moe_b_$r.log; done
  echo "== B4 act-order experts"; timeout 150 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b --m 1,2,3,4,8,16,128 --act-order --out $R/moe_act_order > $R/moe_b_act.log 2>&1; echo "act rc $?"; grep -h "total #wrong" $R/moe_b_act.log
  for v in plain act; do
    echo "== B5 dense $v"; timeout 150 $D/lowbit bench gemm --m 1,8,16,32,128,512 --cooldown-ms 300 $([ $v = act ] && echo --act-order) --out $R/gemm_$v > $R/gemm_b_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/gemm_b_$v.log; done
elif [ "$part" = C ]; then
  # Part C: stream-K for the one-wave 32- / 48-row tiles (branch streamk; binaries in .dev/s39c):
  # its test, the whole suite, then 70b.gate_up (the shape whose plan it changes) at M = 17..48
  # with stream-K on (the plan's rule) and off (LOWBIT_INT4_PIPE_SK=0), two alternating passes,
  # Machete in the same runs; 8b.gate_up and 70b.down as controls (their plans do not change).
  D=.dev/s39c
  for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
  echo "== C1 stream-K test"; timeout 120 $D/lowbit_tests_gpu_int4 --gtest_filter='Int4PipelinedStreamK*' > $R/sk_test.log 2>&1; echo rc $?; grep -E "OK \]|FAILED|Failure|PASSED" $R/sk_test.log | head -20
  echo "== C2 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_c.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_c.log
  for pass in 1 2; do for v in on off; do
    echo "== C3 pass $pass stream-K $v"
    ( [ $v = off ] && export LOWBIT_INT4_PIPE_SK=0; timeout 120 $D/lowbit bench gemm --shapes llama3-70b.gate_up,llama3-8b.gate_up,llama3-70b.down --m 17,24,32,40,48 --cooldown-ms 300 --out $R/gemm_sk_${v}_$pass > $R/gemm_sk_${v}_$pass.log 2>&1; echo "rc $?" ); grep -h "total #wrong" $R/gemm_sk_${v}_$pass.log
  done; done
elif [ "$part" = H ]; then
  # Part H: the act-order gather staged through shared memory (binaries in .dev/s39d): the act-order
  # suites, the whole suite, then the act-order costs again (dense and MoE, with the plain runs).
  D=.dev/s39d
  for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
  echo "== H1 act-order suites"; timeout 150 $D/lowbit_tests_gpu_int4 --gtest_filter='Paths/Int4MoeActOrder*:Int4MoeActOrder*:*Int4GemmActOrder*' > $R/act_order_h.log 2>&1; echo rc $?; grep -E "FAILED|PASSED" $R/act_order_h.log | head
  [ "${2:-}" = quick ] || { echo "== H2 gpu int4 (all)"; timeout 240 $D/lowbit_tests_gpu_int4 --gtest_brief=1 > $R/gpu_int4_h.log 2>&1; echo rc $?; tail -3 $R/gpu_int4_h.log; }
  for v in plain act; do
    echo "== H3 dense $v"; timeout 150 $D/lowbit bench gemm --m 1,8,16,32,128,512 --cooldown-ms 300 $([ $v = act ] && echo --act-order) --out $R/gemm_h_$v > $R/gemm_h_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/gemm_h_$v.log
    echo "== H4 moe $v"; timeout 150 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b,mixtral-8x7b --m 1,2,3,4,8,16,128 $([ $v = act ] && echo --act-order) --out $R/moe_h_$v > $R/moe_h_$v.log 2>&1; echo "$v rc $?"; grep -h "total #wrong" $R/moe_h_$v.log
  done
else
  D=.dev/s38p
  for f in $D/*.xz; do [ -e "$f" ] && xz -d -T4 "$f"; done; chmod +x $D/*
  echo "== D1 moe suites (patched)"; timeout 200 $D/lowbit_tests_gpu_int4 --gtest_brief=1 --gtest_filter='*Moe*' > $R/gpu_moe_patch.log 2>&1; echo rc $?; tail -2 $R/gpu_moe_patch.log
  for r in logits caller; do
    echo "== D2 $r"; timeout 120 $D/lowbit bench moe --shapes qwen3-30b-a3b.tp1,qwen3-30b-a3b.tp2,deepseek-v2-lite,qwen3.5-35b-a3b --m 1,2,3,4,8 --routing $r --out $R/moe_patch_$r > $R/moe_patch_$r.log 2>&1; echo "$r rc $?"; grep -h "total #wrong" $R/moe_patch_$r.log; done
fi
cd $OUT && tar czf results_$part.tgz r
