#!/usr/bin/env bash
# Session 47, second device script: MoE GEMM1's 8-warp pairs give way to 8-warp blocks alone before a
# wide GEMM2 when they would take nearly every SM's two slots (kern::moe_gate_up_shape; the Qwen3.5
# M = 2 outlier). Binaries in .dev/s47r (the plain CLI and lowbit_tests_gpu_int4 at the commit in
# COMMIT). Any card: the whole GPU int4 suite (the single-token path against the four launches bit
# for bit, now with the rule), then the rule against LOWBIT_INT4_MOE_W13_ROOM=0 (the previous plan)
# at M = 1..8 on the five small-expert rows and three tensor-parallel shares of other models where
# it applies (Qwen3-235B-A22B TP8 128x4096x192x8 at M = 5, DeepSeek-V3 TP8 256x7168x256x8 at M = 4,
# Qwen3-235B-A22B TP4 128x4096x384x8 as a row it leaves alone), three alternated passes; then the
# issue's `bench moe` table with the final code.
# Stage: cmake --build build --target lowbit_cli lowbit_tests_gpu_int4; D=.dev/s47r; mkdir -p $D && strip -o $D/lowbit
# build/bin/lowbit && strip -o $D/lowbit_tests_gpu_int4 build/bin/lowbit_tests_gpu_int4 && xz -T2 -f $D/lowbit*; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session47_raw/gpu_room.sh", carry=[".dev/s47r"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s47r; S=$OUT/q; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
if [ -n "${ONLY:-}" ] && ! grep -q "$ONLY" $S/gpu.csv; then echo "not an $ONLY: stopped"; exit 3; fi
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
echo "== T whole GPU int4 suite"; timeout 150 $B/lowbit_tests_gpu_int4 > $S/gpu_int4.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $S/gpu_int4.log | head -8; el
SH=qwen3.5-35b-a3b,qwen3-30b-a3b.tp2,deepseek-v2-lite.tp2,deepseek-v2-lite,qwen3-30b-a3b.tp1,128x4096x192x8,256x7168x256x8,128x4096x384x8
b() { local name=$1; shift; env "$@" timeout 80 $B/lowbit bench moe --shapes $SH --m 1,2,3,4,5,6,7,8 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
echo "== R the rule against the previous plan"
for pass in 1 2 3; do
  [ $(( $(date +%s) - t0 )) -gt 330 ] && { echo "out of time before pass $pass"; break; }
  b rule_$pass; b old_$pass LOWBIT_INT4_MOE_W13_ROOM=0
done; el
grep -h "total #wrong" $S/*_[123].log | sort | uniq -c
python3 - "$S" <<'PY' || true
import json, glob, sys, collections
t = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(sys.argv[1] + '/*_[123].json'):
    name = f.rsplit('/', 1)[1].rsplit('_', 1)[0]
    d = json.load(open(f)); rows = d['rows'] if isinstance(d, dict) else d
    for r in rows: t[(r['shape'], r['M'])][name].append(r['time_us'])
for k in sorted(t):
    if t[k]['rule'] and t[k]['old']:
        a, o = min(t[k]['rule']), min(t[k]['old'])
        if abs(a / o - 1) > 0.02: print(k[0], k[1], f"rule {a:.1f} old {o:.1f} {a / o:.3f}")
print('rows', len(t))
PY
left=$(( ${TOTAL:-560} - ($(date +%s) - t0) ))
[ $left -gt 60 ] && { echo "== M bench moe (all)"; timeout $left $B/lowbit bench moe --out $S/moe > $S/moe.log 2>&1; echo "rc $?"; grep -h "total #wrong" $S/moe.log; el; }
cd $OUT && tar czf room.tgz q && rm -rf q
