#!/usr/bin/env bash
# Session 44: the candidate decode plan (plan-qkv.patch: 8b.qkv's 8-warp blocks alone at M <= 8)
# against the default binary, alternated, bf16 and fp16, every dense shape at M = 1 / 8 / 16 (the
# skinny path, 5 reps), three passes; then the candidate's whole bench gemm table.
# run(command="ONLY=H200 bash docs/benchmarks/logs/session44_raw/gpu_cand.sh", carry=[".dev/s44d"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s44d; C=$OUT/c; mkdir -p $C
cat $B/COMMIT $B/COMMIT_cand > $C/commits.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $C/gpu.txt 2>&1; cat $C/gpu.txt
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $C/gpu.txt; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
for pass in 1 2 3; do for bin in lowbit lowbit_cand; do for dt in bf16 fp16; do
  timeout 40 $B/$bin bench gemm --dtype $dt --m 1,8,16 --path skinny --reps 5 --cooldown-ms 100 --out $C/${bin}_${dt}_$pass > $C/${bin}_${dt}_$pass.log 2>&1 || echo "$bin $dt $pass rc $?"
done; done; done
echo "alternation done in $(( $(date +%s) - t0 )) s"
timeout 120 $B/lowbit_cand bench gemm --cooldown-ms 300 --out $C/gemm_cand > $C/gemm_cand.log 2>&1; echo "cand table rc $?"; grep -h "total #wrong" $C/gemm_cand.log
grep -h "total #wrong" $C/*.log | sort | uniq -c
cd $OUT && tar czf cand.tgz c
