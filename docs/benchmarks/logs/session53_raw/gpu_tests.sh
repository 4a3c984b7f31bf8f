#!/usr/bin/env bash
# Session 53: the GPU test binaries staged in $BIN (lowbit_tests_gpu_*.xz, stripped; COMMIT), run on the
# device: first the cases named by $FIRST (a gtest filter; the new ones), then each whole suite. Logs and
# the card's state go to $OUT/t. Stage (here): cmake --build build --target lowbit_tests_gpu_int4;
# D=.dev/s53i; mkdir -p $D && strip -o $D/lowbit_tests_gpu_int4 build/bin/lowbit_tests_gpu_int4 &&
# xz -T2 -f $D/lowbit_tests_gpu_int4; git rev-parse HEAD > $D/COMMIT
# run(command="BIN=.dev/s53i bash docs/benchmarks/logs/session53_raw/gpu_tests.sh", carry=[".dev/s53i"])
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:?BIN=staged folder}; T=$OUT/t; mkdir -p $T
cat $B/COMMIT > $T/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $T/gpu.csv 2>&1
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
for exe in $B/lowbit_tests_gpu_*; do
  name=$(basename $exe | sed 's/lowbit_tests_gpu_//')
  if [ -n "${FIRST:-}" ]; then
    timeout 300 $exe --gtest_filter="$FIRST" > $T/gpu_${name}_first.log 2>&1
    echo "== $name first ($FIRST) rc $? [$(( $(date +%s) - t0 )) s]"; tail -n 3 $T/gpu_${name}_first.log
  fi
  timeout 400 $exe > $T/gpu_$name.log 2>&1
  echo "== $name tests rc $? [$(( $(date +%s) - t0 )) s]"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran" $T/gpu_$name.log | head -20
done
(cd $OUT && tar czf tests.tgz t)
