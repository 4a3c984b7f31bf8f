#!/usr/bin/env bash
# Session 61: staged x (DecodeCfg::XW) on every 8-warp deep 16-row tile (LOWBIT_INT4_DECODE_XW=2) against the
# plan (staged only where a warp streams <= 4 batches, session 22), three alternated passes, bf16 G = 128,
# M = 9, 12, 16, the eight Llama-3 projections and the Llama-3-70B TP 2 / 4 / 8 shares (rows the knob does not
# touch show the noise). CLI .dev/s61y (edf438d's code). Any card. Files named for scripts/compare_bench.py (e1 = XW=2).
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_staged.sh", carry=[".dev/s61y"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61y; X=$OUT/s; mkdir -p $X
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
SH=llama3-8b.qkv,llama3-8b.o,llama3-8b.gate_up,llama3-8b.down,llama3-70b.qkv,llama3-70b.o,llama3-70b.gate_up,llama3-70b.down
TP=$(for t in 2 4 8; do for p in qkv o gate_up down; do printf "llama3-70b.tp$t.$p,"; done; done); TP=${TP%,}
for pass in 1 2 3; do
  for e in 0 1; do
    x=(); [ $e = 1 ] && x=(LOWBIT_INT4_DECODE_XW=2)
    env "${x[@]}" timeout 100 $B/lowbit bench gemm --shapes $SH,$TP --m 9,12,16 --dtype bf16 --reps 10 --cooldown-ms 50 --out $X/gemm_e${e}_p$pass > $X/gemm_e${e}_p$pass.log 2>&1 || echo "e$e p$pass rc $?"
  done
done
for f in $X/gemm_e*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s wrong=%s\n", n, $2, $6, $9, $19}'
done | sort -k2,3 | awk '{split($1,a,"_"); k=$2" "$3; t[k]=t[k]" "a[2]"="$4} END{for (i in t) print i, t[i]}' | sort > $X/summary.txt
awk '{e0=1e9; e1=1e9; for (i=3;i<=NF;i++){split($i,a,"="); if (a[1]=="e0" && a[2]<e0) e0=a[2]; if (a[1]=="e1" && a[2]<e1) e1=a[2]} r=e1/e0; if (r<0.98||r>1.02) printf "%s %s off=%.1f xw2=%.1f %.3f\n", $1, $2, e0, e1, r}' $X/summary.txt
grep -h "total #wrong" $X/*.md | sort | uniq -c
(cd $OUT && tar czf staged.tgz s)
