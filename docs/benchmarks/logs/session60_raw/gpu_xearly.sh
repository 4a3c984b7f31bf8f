#!/usr/bin/env bash
# Session 60, for the next device call: (1) chain_limit.cu (.dev/s60) and the decode launch-knob sweep
# (gpu_knobs.sh) with the CLI of branch exp/x-early (.dev/s60x; LOWBIT_INT4_DECODE_XEARLY unset runs HEAD's
# kernels' code path), then (2) LOWBIT_INT4_DECODE_XEARLY=0 / 1 alternated three times on the dense shapes
# that miss and their neighbours (bf16 G = 128, M = 1, 8, 16; `#wrong` checks every row against the
# reference) and on the MoE models at M = 1, 8 (the flag reaches every kFull tile, MoE included).
# run(command="bash docs/benchmarks/logs/session60_raw/gpu_xearly.sh", carry=[".dev/s60x", ".dev/s60"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
BIN=.dev/s60x bash docs/benchmarks/logs/session60_raw/gpu_knobs.sh
B=.dev/s60x; X=$OUT/x; mkdir -p $X
cat $B/COMMIT > $X/commit.txt
SH=llama3-8b.o,llama3-8b.qkv,llama3-8b.down,llama3-8b.gate_up,llama3-70b.o
for pass in 1 2 3; do
  for e in 0 1; do
    LOWBIT_INT4_DECODE_XEARLY=$e timeout 90 $B/lowbit bench gemm --shapes $SH --m 1,8,16 --dtype bf16 --reps 10 --cooldown-ms 100 --out $X/gemm_e${e}_p$pass > $X/gemm_e${e}_p$pass.log 2>&1 || echo "gemm e$e p$pass rc $?"
    LOWBIT_INT4_DECODE_XEARLY=$e timeout 90 $B/lowbit bench moe --m 1,8 --dtype bf16 --reps 10 --out $X/moe_e${e}_p$pass > $X/moe_e${e}_p$pass.log 2>&1 || echo "moe e$e p$pass rc $?"
  done
done
for f in $X/gemm_e*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us %s%% wrong=%s\n", n, $2, $6, $9, $13, $19}'
done | sort -k2,3 | tee $X/summary_gemm.txt
grep -h "total #wrong" $X/*.md | sort | uniq -c
(cd $OUT && tar czf xearly.tgz x)
