#!/usr/bin/env bash
# Session 61, second call: the CLI at the x_early rule (.dev/s61x) against LOWBIT_INT4_DECODE_XEARLY=0,
# alternated three times: dense bf16 G = 128 shapes that miss and their neighbours at M = 1, 8, 16, and the
# MoE models at M = 1, 8 (`#wrong` checks every row against the reference).
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_bench.sh", carry=[".dev/s61x"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61x; X=$OUT/x; mkdir -p $X
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
SH=llama3-8b.o,llama3-8b.qkv,llama3-8b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-70b.down
for pass in 1 2 3; do
  for e in 1 0; do
    LOWBIT_INT4_DECODE_XEARLY=$e timeout 90 $B/lowbit bench gemm --shapes $SH --m 1,8,16 --dtype bf16 --reps 10 --cooldown-ms 100 --out $X/gemm_e${e}_p$pass > $X/gemm_e${e}_p$pass.log 2>&1 || echo "gemm e$e p$pass rc $?"
    LOWBIT_INT4_DECODE_XEARLY=$e timeout 90 $B/lowbit bench moe --m 1,8 --dtype bf16 --reps 10 --out $X/moe_e${e}_p$pass > $X/moe_e${e}_p$pass.log 2>&1 || echo "moe e$e p$pass rc $?"
  done
done
for f in $X/gemm_e*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
done | sort -k2,3 | tee $X/summary_gemm.txt
for f in $X/moe_e*_p*.md; do
  grep "^| " $f | grep -v "shape\|---" | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $5, $7, $10, $14}'
done | sort -k2,3 | tee $X/summary_moe.txt
grep -h "total #wrong" $X/*.md | sort | uniq -c
(cd $OUT && tar czf xearly.tgz x)
