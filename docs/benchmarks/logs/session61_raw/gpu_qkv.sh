#!/usr/bin/env bash
# Session 61: 8b.qkv's 8-row tiles. Session 44's rule runs bf16 8b.qkv (96 column groups) in 8-warp blocks alone
# (96 blocks); the knob sweep of this session (H100) had 8-warp pairs with the trigger after the first batch
# faster (7.9 vs 8.8 us at M = 1), but the plan's trigger rule gives pairs (192 blocks > SMs) the trigger at the
# start. Three alternated passes: the plan; 8-warp pairs with trigger 1; pairs with trigger 0 (the plan before
# session 44); bf16 and fp16, M = 1, 2, 4, 8; 70b.qkv (4-warp clusters of 3, 480 blocks) plan vs trigger 1.
# CLI .dev/s61x (binaries 5d961a4). Any card.
# run(command="bash docs/benchmarks/logs/session61_raw/gpu_qkv.sh", carry=[".dev/s61x"], kind="nvidia-h200")
set -u
nvidia-smi -L
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s61x; X=$OUT/q; mkdir -p $X
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
cat $B/COMMIT > $X/commit.txt
for pass in 1 2 3; do
  for dt in bf16 fp16; do
    for v in plan p2t1 p2t0; do
      case $v in plan) e=();; p2t1) e=(LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2 LOWBIT_INT4_DECODE_TRIGGER=1);;
        p2t0) e=(LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=2 LOWBIT_INT4_DECODE_TRIGGER=0);; esac
      env "${e[@]}" timeout 60 $B/lowbit bench gemm --shapes llama3-8b.qkv --m 1,2,4,8 --dtype $dt --reps 10 --cooldown-ms 100 --out $X/${dt}-${v}_p$pass > $X/${dt}-${v}_p$pass.log 2>&1 || echo "$dt $v p$pass rc $?"
    done
    for v in plan t1; do
      case $v in plan) e=();; t1) e=(LOWBIT_INT4_DECODE_TRIGGER=1);; esac
      env "${e[@]}" timeout 60 $B/lowbit bench gemm --shapes llama3-70b.qkv,llama3-70b.o,llama3-70b.down --m 1,8 --dtype $dt --reps 10 --cooldown-ms 100 --out $X/${dt}-70b${v}_p$pass > $X/${dt}-70b${v}_p$pass.log 2>&1 || echo "$dt 70b $v p$pass rc $?"
    done
  done
done
for f in $X/*_p*.md; do
  grep "^| llama" $f | awk -F'|' -v n="$(basename $f .md)" '{gsub(/ /,""); printf "%s %s M=%s %s us wrong=%s\n", n, $2, $6, $9, $19}'
done | sort -k2,3 | awk '{split($1,a,"_"); split(a[1],b,"-"); k=b[1]" "$2" "$3; t[k]=t[k]" "b[2]"="$4} END{for (i in t) print i, t[i]}' | sort | tee $X/summary.txt
grep -h "total #wrong" $X/*.md | sort | uniq -c
(cd $OUT && tar czf qkv.tgz q)
