#!/usr/bin/env bash
# Session 26 round QA: measurement variants of the pipelined kernel's 96/128-row wgmma tiles
# (LOWBIT_INT4_PIPE_VARIANT bits: 1 no proxy fence, 2 wgmma depth 2, 4 next-stage loads after
# step 0's wgmma), M = 128 / 256 / 512, --path pipelined; then correctness of depth 2 + late loads.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o
g() { local n=$1; shift; env "$@" timeout 100 $B/lowbit bench gemm --m 128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 300 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
g v0a LOWBIT_INT4_PIPE_VARIANT=0
g v1 LOWBIT_INT4_PIPE_VARIANT=1
g v2 LOWBIT_INT4_PIPE_VARIANT=2
g v8 LOWBIT_INT4_PIPE_VARIANT=8
g v6 LOWBIT_INT4_PIPE_VARIANT=6
g v10 LOWBIT_INT4_PIPE_VARIANT=10
g v14 LOWBIT_INT4_PIPE_VARIANT=14
g v0b LOWBIT_INT4_PIPE_VARIANT=0
tar -C $R -czf $OUT/results.tgz .
python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); wi=c.index('#wrong'); ci=c.index('cublas_us'); pi=c.index('path'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=(float(c[ti]), c[wi], float(c[ci]))
            except: pass
    return d
vs=['v0a','v1','v2','v6','v8','v10','v14','v0b']
V={v:load(f'{R}/g_{v}.md') for v in vs}
print('us per variant (#wrong); last: cublas')
print(' '*28+''.join(f'{v:>9s}' for v in vs))
for k in sorted(V['v0a'], key=lambda k:(k[0],int(k[1]))):
    print(f"{k[0]:20s} M={k[1]:>4s} "+''.join(f"{V[v][k][0]:7.1f}/{V[v][k][1]}" if k in V[v] else '      -  ' for v in vs)+f"  {V['v0a'][k][2]:7.1f}")
PY
T=$B/lowbit_tests_gpu_int4
tt() { local n=$1 lim=$2 f=$3; shift 3; env "$@" timeout $lim $T --gtest_brief=1 --gtest_filter="$f" > $R/tests_$n.log 2>&1; echo "== tests_$n rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_$n.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_$n.log | head -30; }
tt rows128_v6 90 'Forced/Int4Gemm*pipelined*' LOWBIT_INT4_PIPE_ROWS=128 LOWBIT_INT4_PIPE_VARIANT=6
tt rows128_v14 90 'Forced/Int4Gemm*pipelined*' LOWBIT_INT4_PIPE_ROWS=128 LOWBIT_INT4_PIPE_VARIANT=14
tt rows96_v8 90 'Forced/Int4Gemm*pipelined*' LOWBIT_INT4_PIPE_ROWS=96 LOWBIT_INT4_PIPE_VARIANT=8
tar -C $R -czf $OUT/results.tgz .
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
if [ -n "$NCU" ]; then
 for v in 0 14; do
  LOWBIT_INT4_PIPE_VARIANT=$v timeout 120 $NCU --clock-control none -k regex:gemm_pipelined --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis $B/lowbit bench gemm --m 512 --shapes llama3-70b.gate_up --path pipelined --reps 1 --cooldown-ms 0 --out $R/ncu_$v > $R/ncu_v$v.txt 2>&1; echo "== ncu v$v rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "Issue Slots Busy|Eligible Warps|No Eligible|Duration|Compute \(SM\)|Stall|pipeline" $R/ncu_v$v.txt | head -20
 done
fi
tar -C $R -czf $OUT/results.tgz .
