#!/usr/bin/env bash
# Session 47: gpu_room.sh cut to the device time left (~250 s with the start): the rule against
# LOWBIT_INT4_MOE_W13_ROOM=0 first (the rows where it applies only: Qwen3.5 M = 2, the Qwen3-235B-A22B TP8
# share at M = 5, DeepSeek-V3 TP8 at M = 4, and Qwen3 TP2 M = 2 where it must not apply), alternated passes
# until PASS_S seconds, the results tarred after each pass so that a cut call still returns them; then the
# GPU int4 suite's MoE cases.
# run(command="bash docs/benchmarks/logs/session47_raw/gpu_room_short.sh", carry=[".dev/s47r"], kind="nvidia-h200")
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s47r; S=$OUT/q; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s); pack() { (cd $OUT && tar czf room.tgz q); }
b() { local name=$1 sh=$2 m=$3; shift 3; env "$@" timeout 40 $B/lowbit bench moe --shapes $sh --m $m --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3 4; do
  [ $(( $(date +%s) - t0 )) -gt ${PASS_S:-60} ] && break
  for v in rule old; do
    e=LOWBIT_INT4_MOE_W13_ROOM=1; [ $v = old ] && e=LOWBIT_INT4_MOE_W13_ROOM=0
    b ${v}a_$pass qwen3.5-35b-a3b,qwen3-30b-a3b.tp2 2 $e
    b ${v}b_$pass 128x4096x192x8 5 $e
    b ${v}c_$pass 256x7168x256x8 4 $e
  done
  echo "pass $pass: $(( $(date +%s) - t0 )) s"; pack
done
grep -h "total #wrong" $S/*_[1-4].log | sort | uniq -c
python3 - "$S" <<'PY' || true
import json, glob, sys, collections
t = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(sys.argv[1] + '/*_[1-4].json'):
    name = f.rsplit('/', 1)[1][:-7].rstrip('abc')
    d = json.load(open(f)); rows = d['rows'] if isinstance(d, dict) else d
    for r in rows: t[(r['shape'], r['M'])][name].append(r['time_us'])
for k in sorted(t):
    a, o = t[k]['rule'], t[k]['old']
    if a and o: print(k[0], k[1], f"rule {min(a):.1f} old {min(o):.1f} {min(a) / min(o):.3f}", [round(x, 1) for x in a], [round(x, 1) for x in o])
PY
pack
echo "== MoE cases of the GPU int4 suite"; timeout ${SUITE_S:-60} $B/lowbit_tests_gpu_int4 --gtest_filter='*Moe*' > $S/gpu_int4_moe.log 2>&1; echo rc $?; grep -E "^\[  (PASSED|FAILED)|tests ran" $S/gpu_int4_moe.log | head -5
echo "[$(( $(date +%s) - t0 )) s]"; pack; rm -rf $S
