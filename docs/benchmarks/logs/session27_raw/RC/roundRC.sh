#!/usr/bin/env bash
# Session 27 round RC: the warp-specialized tiles, copies issued by four producer warps, and a
# warp-uniform role branch, against the pipelined tile, alternating twice; Nsight Compute stall
# profiles of both at 70b.gate_up M = 96 / 512.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
timeout 90 $T --gtest_filter='Int4GemmPipelinedWs*' > $R/tests_ws.log 2>&1; rc=$?
echo "== tests_ws rc=$rc $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_ws.log)"; grep -m5 -A8 "Failure" $R/tests_ws.log | head -40
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o
g() { local n=$1 ws=$2; LOWBIT_INT4_PIPE_WS=$ws timeout 95 $B/lowbit bench gemm --m 96,128,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 100 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
if [ $rc -eq 0 ]; then
  for rep in 1 2; do g ws_$rep 2; g base_$rep 0; done
  python3 - $R <<'PY'
import sys, os
R=sys.argv[1]
def load(f):
    d={}; ti=None
    if not os.path.exists(f): return d
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if l.startswith('| shape'): ti=c.index('time_us'); wi=c.index('#wrong'); ci=c.index('cublas_us'); continue
        if ti is not None and l.startswith('| ') and not l.startswith('|-'):
            try: d[(c[0],c[3])]=(float(c[ti]), c[wi], float(c[ci]))
            except: pass
    return d
V={v:[load(f'{R}/g_{v}_{r}.md') for r in (1,2)] for v in ('ws','base')}
print('min of two, us: ws vs base, ratio, wrong, cublas, ws/cublas')
for k in sorted(V['ws'][0], key=lambda k:(k[0],int(k[1]))):
    try:
        a=min(x[k][0] for x in V['ws'] if k in x); b=min(x[k][0] for x in V['base'] if k in x)
        cb=min(x[k][2] for v in V for x in V[v] if k in x)
        print(f"  {k[0]:20s} M={k[1]:>3s} {a:7.1f} {b:7.1f} ({a/b:.3f}) wrong {','.join(x[k][1] for v in V for x in V[v] if k in x)} | {cb:7.1f} {cb/a:.2f}x")
    except Exception as e: print(k, e)
PY
  tar -C $R -czf $OUT/results.tgz .
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  prof() { local n=$1 k=$2 ws=$3; shift 3; LOWBIT_INT4_PIPE_WS=$ws timeout 100 $NCU --clock-control none -k regex:$k --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy $B/lowbit "$@" > $R/ncu_$n.txt 2>&1; echo "== ncu $n rc=$? $(( $(date +%s)-t0 ))s"; grep -E "Duration|Issue Slots Busy|Eligible Warps|No Eligible" $R/ncu_$n.txt | head -8; }
  prof base_m512 gemm_pipelined_kernel 0 bench gemm --m 512 --shapes llama3-70b.gate_up --path pipelined --reps 1 --cooldown-ms 0 --out $R/n2
  tar -C $R -czf $OUT/results.tgz .
  prof ws_m512 gemm_pipelined_ws 2 bench gemm --m 512 --shapes llama3-70b.gate_up --path pipelined --reps 1 --cooldown-ms 0 --out $R/n3
fi
tar -C $R -czf $OUT/results.tgz .
if [ $rc -eq 0 ] && [ $(( $(date +%s)-t0 )) -lt 400 ]; then
  LOWBIT_INT4_PIPE_WS=2 timeout 150 $T --gtest_brief=1 --gtest_filter='*Int4Gemm*' > $R/tests_gemm_ws2.log 2>&1
  echo "== tests_gemm_ws2 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_gemm_ws2.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_gemm_ws2.log | head -30
fi
tar -C $R -czf $OUT/results.tgz .
