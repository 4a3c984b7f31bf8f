#!/usr/bin/env bash
# Session 27 round RF: the final kernels (one epilogue for both roles, a proxy fence before each stage release) (warp-specialized 96/128-row tiles by default, 8 stages):
# the WS test, the pipelined bench against LOWBIT_INT4_PIPE_WS=0 (alternating twice), all GPU
# int4 and model tests, the kAuto gemm table, memcheck / synccheck of the WS test.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=/tmp/lb; rm -rf $B; mkdir -p $B; tar -C $B -xJf .dev/bin/bins.tar.xz
R=/tmp/r; rm -rf $R; mkdir -p $R
t0=$(date +%s)
T=$B/lowbit_tests_gpu_int4
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv > $R/gpu.txt 2>&1
timeout 90 $T --gtest_filter='Int4GemmPipelinedWs*' > $R/tests_ws.log 2>&1; rc=$?
echo "== tests_ws rc=$rc $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_ws.log)"; grep -m5 -A8 "Failure" $R/tests_ws.log | head -40
for tool in synccheck memcheck racecheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $T --gtest_filter='Int4GemmPipelinedWs*' > $R/${tool}_ws.log 2>&1
  echo "== ${tool}_ws rc=$? $(( $(date +%s)-t0 ))s $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/${tool}_ws.log | tail -n 1)"
done
tar -C $R -czf $OUT/results.tgz .
S=llama3-70b.gate_up,llama3-70b.down,llama3-8b.gate_up,llama3-70b.o,llama3-70b.qkv,llama3-8b.qkv,llama3-8b.o,llama3-8b.down
g() { local n=$1 ws=$2; LOWBIT_INT4_PIPE_WS=$ws timeout 95 $B/lowbit bench gemm --m 32,48,64,96,128,256,512 --shapes $S --path pipelined --reps 5 --cooldown-ms 200 --out $R/g_$n > $R/g_$n.log 2>&1; echo "== g_$n rc=$? $(( $(date +%s)-t0 ))s"; }
if [ $rc -eq 0 ]; then
  for rep in 1 2; do g ws_$rep 1; g base_$rep 0; done
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
print('min of two, us: ws vs base, ratio, wrong, cublas, cublas/ws')
for k in sorted(V['ws'][0], key=lambda k:(k[0],int(k[1]))):
    try:
        a=min(x[k][0] for x in V['ws'] if k in x); b=min(x[k][0] for x in V['base'] if k in x)
        cb=min(x[k][2] for v in V for x in V[v] if k in x)
        print(f"  {k[0]:20s} M={k[1]:>3s} {a:7.1f} {b:7.1f} ({a/b:.3f}) wrong {','.join(x[k][1] for v in V for x in V[v] if k in x)} | {cb:7.1f} {cb/a:.2f}x")
    except Exception as e: print(k, e)
PY
  tar -C $R -czf $OUT/results.tgz .
fi
timeout 200 $T --gtest_brief=1 > $R/tests_int4.log 2>&1; echo "== tests_int4 rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_int4.log)"; grep -m3 -B2 -A12 "FAILED\|Failure" $R/tests_int4.log | head -30
tar -C $R -czf $OUT/results.tgz .
timeout 120 $B/lowbit_tests_gpu_model --gtest_brief=1 > $R/tests_model.log 2>&1; echo "== model rc=$? $(( $(date +%s)-t0 ))s $(tail -n 1 $R/tests_model.log)"
tar -C $R -czf $OUT/results.tgz .
timeout 120 $B/lowbit bench gemm --out $R/gemm > $R/gemm.log 2>&1; echo "== gemm rc=$? $(( $(date +%s)-t0 ))s $(grep -c '^| llama' $R/gemm.md) rows, wrong: $(grep 'total #wrong' $R/gemm.log)"
tar -C $R -czf $OUT/results.tgz .
