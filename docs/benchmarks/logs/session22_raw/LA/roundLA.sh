#!/usr/bin/env bash
# Session 22 round LA (experiment): is the x fragment load (scattered 4 B __ldg over 8 rows per
# instruction) what limits the 16-row decode tiles? (1) Nsight Compute sections on 70b.gate_up
# M = 8 / 16, 70b.o M = 16, 8b.down M = 16; (2) timing vs a probe binary whose lanes all read
# x row 0 (one cache line per load instruction; wrong sums, timing only), alternating twice.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
for rep in 1 2; do for v in base probe; do
  L=$B/lowbit; [ $v = probe ] && L=$B/lowbit_probe
  timeout 60 $L bench gemm --m 1,8,12,16 --path skinny --reps 10 --out $R/g_${v}_$rep > $R/g_${v}_$rep.log 2>&1; echo "== g_${v}_$rep rc=$?"
done; done
python3 - $R <<'PY'
import sys
R=sys.argv[1]
def load(f):
    d={}; ti=None
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=float(c[ti])
            except: pass
    return d
n=[load(f'{R}/g_probe_{r}.md') for r in (1,2)]; o=[load(f'{R}/g_base_{r}.md') for r in (1,2)]
for k in o[0]:
    a=min(x[k] for x in n); b=min(x[k] for x in o); print(*k, f"probe {a:.1f} base {b:.1f} ratio {a/b:.3f}")
PY
tar -C $R -czf $OUT/results.tgz .
echo "elapsed $(( $(date +%s)-t0 ))s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
run_ncu() {  # binary shape M tag
  timeout 120 $NCU --clock-control none --kernel-name regex:gemm_decode_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section InstructionStats \
    $1 bench gemm --shapes $2 --m $3 --path skinny --reps 2 --out $R/nb > $R/ncu_$4.txt 2>&1; echo "== ncu $4 rc=$?"
}
run_ncu $B/lowbit llama3-70b.gate_up 16 gu16
run_ncu $B/lowbit llama3-70b.gate_up 8 gu8
run_ncu $B/lowbit llama3-70b.o 16 o16
run_ncu $B/lowbit llama3-8b.down 16 d16
run_ncu $B/lowbit_probe llama3-70b.gate_up 16 gu16_probe
run_ncu $B/lowbit_probe llama3-70b.o 16 o16_probe
tar -C $R -czf $OUT/results.tgz .
echo "elapsed $(( $(date +%s)-t0 ))s"
