#!/usr/bin/env bash
# Session 68, the clusters-of-4 rule (few_units_k8192 in decode_plan.h: 8-warp 8-row blocks in split-K clusters of 4
# on <= 7/16 x SMs column groups and K >= 8192, M <= 8, the next launch after the first batches) in the binaries of
# its commit (.dev/s68c: the CLI without Marlin and lowbit_tests_gpu_int4). Any card:
#  1. the int4 GPU suite (the new DecodePush and Forced cases run the clusters of 4 and of 3);
#  2. the rule as the plan against LOWBIT_INT4_DECODE_C4=0 (the plan before it) on the shapes it moves and three it
#     leaves (8b.o, 2048 x 4096, 1024 x 6144), M = 1 / 4 / 8: bf16 and fp16 G = 128 (3 alternated passes), bf16
#     G = 32 / 64 / per-channel / asymmetric G = 128 (2 passes); table by scripts/compare_bench.py.
# On an H200 then also the four tables (gpu_tables.sh) with these binaries.
# run(command="tar xJf .dev/s68c/s68c.tar.xz -C .dev/s68c && rm .dev/s68c/s68c.tar.xz; BIN=.dev/s68c bash docs/benchmarks/logs/session68_raw/gpu_c4.sh", carry=[".dev/s68c"], timeout_s=560)
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s68c}; V=$OUT/c4; mkdir -p $V/ab $V/abg; chmod +x $B/*
nvidia-smi -L | tee $V/gpu.txt; cat $B/COMMIT | tee $V/commit.txt
t0=$(date +%s)
timeout 240 $B/lowbit_tests_gpu_int4 --gtest_brief=1 > $V/tests_int4.log 2>&1
echo "== int4 tests rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|FAILED" $V/tests_int4.log | head -20
(cd $OUT && tar czf c4_tests.tgz c4)
D=$V/ab; source docs/benchmarks/logs/session68_raw/ab_c4.sh  # SH and ab() (session 68: were written here)
for p in 1 2 3; do ab bf16 $p --dtype bf16; ab fp16 $p --dtype fp16; done
for p in 1 2; do ab g32 $p --dtype bf16 --group 32; ab g64 $p --dtype bf16 --group 64; ab gpc $p --dtype bf16 --group -1; ab asym $p --dtype bf16 --asym; done
mv $V/ab/g32_* $V/ab/g64_* $V/ab/gpc_* $V/ab/asym_* $V/abg/
for d in ab abg; do
  python3 scripts/compare_bench.py $V/$d $V/rule_$d "8-warp clusters of 4 (rule) vs LOWBIT_INT4_DECODE_C4=0" > /dev/null 2>&1 || echo "compare $d failed"
  grep "^|" $V/rule_$d.md | head -120
done
find $V/ab $V/abg -name '*_p*.png' -delete; (cd $OUT && tar czf c4.tgz c4 && rm -f c4_tests.tgz)
echo "[$(( $(date +%s) - t0 )) s]"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
TOTAL=${TOTAL:-200} BIN=$B bash docs/benchmarks/logs/session51_raw/gpu_tables.sh
