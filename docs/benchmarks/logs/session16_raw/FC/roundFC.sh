#!/usr/bin/env bash
# Session 16 round FC: M = 1 knobs. MoE (single-token path) and dense decode with split-K
# clusters off / other warps, programmatic launches off, GEMM2's early reads off; traces of
# Qwen3 TP1 M = 1 under the same knobs (epilogue time with and without the cluster).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }
sumg() { grep -E "^ +llama" $1 | awk '{print $1, $4, $7, $11, $15}'; }
summ() { grep -E "^ +(qwen|deepseek|mixtral)" $1 | awk '{print $1, $4, $6, $9}'; }
runm() { local tag=$1; shift; env "$@" timeout 60 $B/lowbit bench moe --m 1 --path fused --out $R/m_$tag > $R/m_$tag.log 2>&1; echo "moe $tag rc=$? $(el)"; }
rung() { local tag=$1; shift; env "$@" timeout 60 $B/lowbit bench gemm --m 1 --path skinny --out $R/g_$tag > $R/g_$tag.log 2>&1; echo "gemm $tag rc=$? $(el)"; }
for rep in 1 2; do
  runm def$rep X=1
  runm s1_$rep LOWBIT_INT4_DECODE_SPLITS=1
  runm s1w4_$rep LOWBIT_INT4_DECODE_SPLITS=1 LOWBIT_INT4_DECODE_WARPS=4
  runm w4_$rep LOWBIT_INT4_DECODE_WARPS=4
  runm early0_$rep LOWBIT_INT4_MOE_EARLY=0
  runm pdl0_$rep LOWBIT_INT4_PDL=0
  runm s2_$rep LOWBIT_INT4_DECODE_SPLITS=2
  runm s4_$rep LOWBIT_INT4_DECODE_SPLITS=4
done
for rep in 1 2; do
  rung def$rep X=1
  rung s1_$rep LOWBIT_INT4_DECODE_SPLITS=1
  rung pdl0_$rep LOWBIT_INT4_PDL=0
done
for f in $R/m_*.log; do echo "== $f"; summ $f; done
for f in $R/g_*.log; do echo "== $f"; sumg $f; done
for v in "def X=1" "s1 LOWBIT_INT4_DECODE_SPLITS=1" "early0 LOWBIT_INT4_MOE_EARLY=0" "pdl0 LOWBIT_INT4_PDL=0"; do set -- $v
  env $2 LOWBIT_INT4_TRACE_OUT=$R/tr_$1 timeout 60 $B/lowbit_trace bench moe --m 1 --shapes qwen3-30b-a3b.tp1,deepseek-v2-lite --path fused --reps 3 --out $R/trace_$1 > $R/trace_$1.log 2>&1; echo "trace $1 rc=$? $(el)"; done
gzip $R/tr_*.csv; rm -f $R/*.png $R/*.json
tar -C $R -czf $OUT/results.tgz .
