#!/usr/bin/env bash
# Session 61: the M = 9..16 tile choice again now that x comes two batches ahead (x_early) on the deep 16-row tiles
# in pairs: the plan against each measurement knob that moves these shapes to another tile, three alternated
# passes, bf16 G = 128, 8b.o / 8b.qkv / 8b.down / 70b.o at M = 12, 16. Knobs: XW=0 (staged x -> x from L2),
# XW=2 (every 8-warp deep tile stages x), LEAN=0 (lean -> deep), LEAN=2 (every 8-warp deep tile lean),
# XSHARED=2 (block-shared x tiles), ROWS16=0 (8-row tiles), XEARLY=2 (x_early on every kFull tile).
# CLI .dev/s61y (edf438d's code). Any card.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_rows16.sh", carry=[".dev/s61y"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61y; X=$OUT/r; mkdir -p $X
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
for pass in 1 2 3; do
  for v in plan XW=0 XW=2 LEAN=0 LEAN=2 XSHARED=2 ROWS16=0 XEARLY=2; do
    e=(); [ $v != plan ] && e=(LOWBIT_INT4_DECODE_$v)
    n=$(echo $v | tr '=' '-')
    env "${e[@]}" timeout 60 $B/lowbit bench gemm --shapes llama3-8b.o,llama3-8b.qkv,llama3-8b.down,llama3-70b.o --m 12,16 --dtype bf16 --reps 10 --cooldown-ms 100 --out $X/${n}_p$pass > $X/${n}_p$pass.log 2>&1 || echo "$v p$pass rc $?"
  done
done
for f in $X/*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us wrong=%s\n", n, $2, $6, $9, $19}'
done | sort -k2,3 | awk '{split($1,a,"_p"); k=$2" "$3; if (!(k SUBSEP a[1] in m) || $4 < m[k SUBSEP a[1]]) m[k SUBSEP a[1]]=$4; keys[k]=1; vs[a[1]]=1} END{for (k in keys) {line=k; for (v in vs) line=line" "v"="m[k SUBSEP v]; print line}}' | sort | tee $X/summary.txt
grep -h "total #wrong" $X/*.md | sort | uniq -c
(cd $OUT && tar czf rows16.tgz r)
