#!/usr/bin/env bash
# Session 48: the first GPU run of session 47's rule (kern::moe_gate_up_shape, commit c837627; binaries
# restaged at 9da3ae1 in .dev/s47r, the same decisions), cut to the device time a session has left after
# failed starts: the whole GPU int4 suite, then the rule against LOWBIT_INT4_MOE_W13_ROOM=0 on the rows
# where it applies (Qwen3.5-35B-A3B M = 2, Qwen3-235B-A22B TP8 share 128x4096x192x8 at M = 5, DeepSeek-V3
# TP8 share 256x7168x256x8 at M = 4) and two it leaves alone (Qwen3 TP2 M = 2, Qwen3.5 M = 1), alternated
# passes until PASS_S seconds; results tarred after every step so a cut call still returns them.
# run(command="bash docs/benchmarks/logs/session48_raw/gpu_verify.sh", carry=[".dev/s47r"], kind="nvidia-h200"); BIN=.dev/s48r
# (staged like session47_raw/gpu_room.sh) runs the bounded rule of commit 37ab2e4 instead.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=${BIN:-.dev/s47r}; S=$OUT/q; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }; pack() { (cd $OUT && tar czf verify.tgz q); }
echo "== T whole GPU int4 suite"; timeout ${SUITE_S:-200} $B/lowbit_tests_gpu_int4 > $S/gpu_int4.log 2>&1; echo rc $?
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED TEST" $S/gpu_int4.log | head -12; el; pack
b() { local name=$1 sh=$2 m=$3; shift 3; env "$@" timeout 40 $B/lowbit bench moe --shapes $sh --m $m --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
echo "== R the rule against LOWBIT_INT4_MOE_W13_ROOM=0"
for pass in 1 2 3 4 5; do
  [ $(( $(date +%s) - t0 )) -gt ${PASS_S:-200} ] && break
  for v in rule old; do
    e=LOWBIT_INT4_MOE_W13_ROOM=1; [ $v = old ] && e=LOWBIT_INT4_MOE_W13_ROOM=0
    b ${v}a_$pass qwen3.5-35b-a3b,qwen3-30b-a3b.tp2 1,2 $e
    b ${v}b_$pass 128x4096x192x8 5 $e
    b ${v}c_$pass 256x7168x256x8 4 $e
  done
  echo "pass $pass"; el; pack
done
grep -h "total #wrong" $S/*_[1-5].log | sort | uniq -c
python3 - "$S" <<'PY' || true
import json, glob, sys, collections
t = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(sys.argv[1] + '/*_[1-5].json'):
    name = f.rsplit('/', 1)[1].split('_')[0][:-1]
    d = json.load(open(f)); rows = d['rows'] if isinstance(d, dict) else d
    for r in rows: t[(r['shape'], r['M'])][name].append(r['time_us'])
for k in sorted(t):
    a, o = t[k]['rule'], t[k]['old']
    if a and o: print(k[0], k[1], f"rule {min(a):.1f} old {min(o):.1f} {min(a) / min(o):.3f}", [round(x, 1) for x in a], [round(x, 1) for x in o])
PY
el; pack; rm -rf $S
