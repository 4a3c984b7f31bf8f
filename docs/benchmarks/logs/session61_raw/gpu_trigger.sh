#!/usr/bin/env bash
# Session 61: the dense decode kernel's PDL trigger (LOWBIT_INT4_DECODE_TRIGGER=0 start / 1 after the first
# batch / 2 after the K loop; unset = the plan's rule) and the split-K push (LOWBIT_INT4_DECODE_PUSH=0: rank 0
# loads the other ranks' sums) at HEAD's x_early rule, two alternated passes, 8b.o / qkv / down and 70b.o at
# M = 1, 8, 16 (bf16 G = 128; `#wrong` checks every row). CLI: .dev/s61x (binaries 5d961a4). Any card.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_trigger.sh", carry=[".dev/s61x"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61x; X=$OUT/g; mkdir -p $X
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
SH=llama3-8b.o,llama3-8b.qkv,llama3-8b.down,llama3-70b.o
for pass in 1 2; do
  for v in plan t0 t1 t2 push0; do
    case $v in plan) e=();; t*) e=(LOWBIT_INT4_DECODE_TRIGGER=${v#t});; push0) e=(LOWBIT_INT4_DECODE_PUSH=0);; esac
    env "${e[@]}" timeout 60 $B/lowbit bench gemm --shapes $SH --m 1,8,16 --dtype bf16 --reps 10 --cooldown-ms 100 --out $X/${v}_p$pass > $X/${v}_p$pass.log 2>&1 || echo "$v p$pass rc $?"
  done
done
for f in $X/*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us wrong=%s\n", n, $2, $6, $9, $19}'
done | sort -k2,3 | awk '{k=$2" "$3; split($1,a,"_"); t[k]=t[k]" "a[1]"="$4} END{for (i in t) print i, t[i]}' | sort | tee $X/summary.txt
grep -h "total #wrong" $X/*.md | sort | uniq -c
(cd $OUT && tar czf trigger.tgz g)
