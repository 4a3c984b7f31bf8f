#!/usr/bin/env bash
# Session 61: split-K cluster size of the 8-warp 16-row tiles at M = 9 / 12 / 16 on the two projections that stay
# below 50% there (8b.o: staged pairs; 8b.qkv: lean pairs): the plan against LOWBIT_INT4_DECODE_SPLITS=1 / 3 / 4,
# two alternated passes, bf16 G = 128. CLI .dev/s61w (a683b30's code). Any card.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_splits16.sh", carry=[".dev/s61w"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61w; X=$OUT/k; mkdir -p $X
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
for pass in 1 2; do
  for v in plan 1 3 4; do
    e=(); [ $v != plan ] && e=(LOWBIT_INT4_DECODE_SPLITS=$v)
    env "${e[@]}" timeout 60 $B/lowbit bench gemm --shapes llama3-8b.o,llama3-8b.qkv --m 9,12,16 --dtype bf16 --reps 10 --cooldown-ms 50 --out $X/s${v}_p$pass > $X/s${v}_p$pass.log 2>&1 || echo "$v p$pass rc $?"
  done
done
for f in $X/s*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s\n", n, $2, $6, $9}'
done | sort -k2,3 | awk '{split($1,a,"_p"); k=$2" "$3; if (!(k SUBSEP a[1] in m) || $4 < m[k SUBSEP a[1]]) m[k SUBSEP a[1]]=$4; keys[k]=1; vs[a[1]]=1} END{for (k in keys) {line=k; for (v in vs) line=line" "v"="m[k SUBSEP v]; print line}}' | sort | tee $X/summary.txt
grep -h "total #wrong" $X/*.log | sort | uniq -c
(cd $OUT && tar czf splits16.tgz k)
