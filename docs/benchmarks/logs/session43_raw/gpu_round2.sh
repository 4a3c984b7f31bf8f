#!/usr/bin/env bash
# Session 43's second GPU call: the whole GPU int4 suite with the fold checks that state what fp16
# on the MMA-tiled decode tile keeps (tests/gpu/int4/test_act_order.cu), then what that tile's fp16
# shortcut (kHiX16) is worth: bench gemm at M = 1 / 8 / 16 in fp16 and bf16, alternated twice.
# Stage: D=.dev/s43t; mkdir -p $D && for b in lowbit lowbit_tests_gpu_int4; do
#   strip -o $D/$b build/bin/$b && xz -T2 -f $D/$b; done; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session43_raw/gpu_round2.sh .dev/s43t", carry=[".dev/s43t"])
set -u
D=${1:-.dev/s43t}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
R=$OUT/r; mkdir -p $R
cat $D/COMMIT > $R/commit.txt 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
for f in $D/*.xz; do [ -e "$f" ] && xz -d -T8 "$f"; done; chmod +x $D/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T1 act-order suites"; timeout 60 $D/lowbit_tests_gpu_int4 --gtest_filter='*ActOrder*' > $R/act_order.log 2>&1; echo rc $?
grep -E "^\[  (PASSED|FAILED)|info  " $R/act_order.log | head -20; el
echo "== T2 whole GPU int4 suite"; timeout 200 $D/lowbit_tests_gpu_int4 > $R/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)" $R/gpu_int4.log | head -8; el
for pass in 1 2; do for t in fp16 bf16; do
  echo "== B$pass $t"; timeout 60 $D/lowbit bench gemm --m 1,8,16 --dtype $t --path skinny --out $R/dec_${t}_$pass > $R/dec_${t}_$pass.log 2>&1; echo "rc $?"; grep -h "total #wrong" $R/dec_${t}_$pass.log; el
done; done
cd $OUT && tar czf results2.tgz r
