#!/usr/bin/env bash
# Session 61: where else staged x might pay, with the CLI of 8f4a2c0's code (.dev/s61z), two alternated passes,
# bf16 G = 128: (a) M = 17 / 24 / 32, the plan against LOWBIT_INT4_DECODE_XW=2 (the 8-warp deep tiles there
# stage x too), the eight projections; (b) M = 9 / 12 / 16, the plan against LOWBIT_INT4_DECODE_LEAN=0 + XW=2
# (the lean tiles' shapes as 8-warp deep tiles with staged x). Files named for scripts/compare_bench.py (e1 = the knob).
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_staged2.sh", carry=[".dev/s61z"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61z; X=$OUT/t; mkdir -p $X/a $X/b
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
SH=llama3-8b.qkv,llama3-8b.o,llama3-8b.gate_up,llama3-8b.down,llama3-70b.qkv,llama3-70b.o,llama3-70b.gate_up,llama3-70b.down
LEANSH=llama3-8b.qkv,llama3-70b.gate_up,llama3-70b.down,llama3-70b.tp2.o,llama3-70b.tp2.qkv,llama3-70b.tp4.gate_up
for pass in 1 2; do
  timeout 90 $B/lowbit bench gemm --shapes $SH --m 17,24,32 --dtype bf16 --reps 10 --cooldown-ms 50 --out $X/a/gemm_e0_p$pass > $X/a/e0_p$pass.log 2>&1 || echo "a e0 rc $?"
  LOWBIT_INT4_DECODE_XW=2 timeout 90 $B/lowbit bench gemm --shapes $SH --m 17,24,32 --dtype bf16 --reps 10 --cooldown-ms 50 --out $X/a/gemm_e1_p$pass > $X/a/e1_p$pass.log 2>&1 || echo "a e1 rc $?"
  timeout 90 $B/lowbit bench gemm --shapes $LEANSH --m 9,12,16 --dtype bf16 --reps 10 --cooldown-ms 50 --out $X/b/gemm_e0_p$pass > $X/b/e0_p$pass.log 2>&1 || echo "b e0 rc $?"
  LOWBIT_INT4_DECODE_LEAN=0 LOWBIT_INT4_DECODE_XW=2 timeout 90 $B/lowbit bench gemm --shapes $LEANSH --m 9,12,16 --dtype bf16 --reps 10 --cooldown-ms 50 --out $X/b/gemm_e1_p$pass > $X/b/e1_p$pass.log 2>&1 || echo "b e1 rc $?"
done
for d in a b; do
  for f in $X/$d/gemm_e*_p*.md; do
    grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s\n", n, $2, $6, $9}'
  done | sort -k2,3 | awk '{split($1,a,"_"); k=$2" "$3; t[k]=t[k]" "a[2]"="$4} END{for (i in t) print i, t[i]}' | sort > $X/$d/summary.txt
  echo "== $d"; awk '{e0=1e9; e1=1e9; for (i=3;i<=NF;i++){split($i,a,"="); if (a[1]=="e0" && a[2]<e0) e0=a[2]; if (a[1]=="e1" && a[2]<e1) e1=a[2]} printf "%s %s plan=%.1f knob=%.1f %.3f\n", $1, $2, e0, e1, e1/e0}' $X/$d/summary.txt
done
grep -h "total #wrong" $X/*/*.log | sort | uniq -c
(cd $OUT && tar czf staged2.tgz t)
