# Session 68 (sourced by gpu_c4.sh and h200_round.sh): the clusters-of-4 rule's on / off A/B, one pass of
# `lowbit bench gemm` each way into D as LABEL_e1_pN (the plan) and LABEL_e0_pN (LOWBIT_INT4_DECODE_C4=0), the
# files scripts/compare_bench.py reads. SH: the ten weights the rule moves and three it leaves (8b.o, 2048 x 4096,
# 1024 x 6144). Needs B (the CLI's folder) and D; TMO: each bench's timeout (90 s).
SH=llama3-70b.tp8.qkv,llama3-70b.tp4.qkv,512x8192,1024x8192,1536x8192,2048x8192,2816x8192,3584x8192,1024x14336,2816x14336,llama3-8b.o,2048x4096,1024x6144
ab() {  # label pass extra bench arguments...
  local l=$1 p=$2; shift 2
  timeout ${TMO:-90} $B/lowbit bench gemm --shapes $SH --m 1,4,8 "$@" --reps 10 --cooldown-ms 100 --out $D/${l}_e1_p$p > $D/${l}_e1_p$p.log 2>&1 || echo "$l e1 p$p rc $?"
  LOWBIT_INT4_DECODE_C4=0 timeout ${TMO:-90} $B/lowbit bench gemm --shapes $SH --m 1,4,8 "$@" --reps 10 --cooldown-ms 100 --out $D/${l}_e0_p$p > $D/${l}_e0_p$p.log 2>&1 || echo "$l e0 p$p rc $?"
}
