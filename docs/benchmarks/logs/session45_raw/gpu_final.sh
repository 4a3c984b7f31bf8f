#!/usr/bin/env bash
# Session 45's last call: the fresh clone's CI build of the final commit (.dev/s45m/COMMIT; the
# decode plan back to session 44's, the review mends of 9fbd75f): the whole GPU int4 suite, the
# single-GPU model tests and the codec GPU tests. No multi-GPU kind is lent this session.
# run(command="bash docs/benchmarks/logs/session45_raw/gpu_final.sh", carry=[".dev/s45m"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s45m; R=$OUT/f; mkdir -p $R
cat $B/COMMIT > $R/commit.txt
if [ -n "${ONLY:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q "$ONLY"; then echo "not an $ONLY: stopped"; exit 3; fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.csv 2>&1; head -2 $R/gpu.csv
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
for t in int4 model codec; do
  echo "== $t"; timeout 240 $B/lowbit_tests_gpu_$t > $R/gpu_$t.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran" $R/gpu_$t.log | head -8; el
done
cd $OUT && tar czf final.tgz f
