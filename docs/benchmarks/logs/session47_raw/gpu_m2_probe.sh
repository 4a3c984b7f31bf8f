#!/usr/bin/env bash
# Session 47: the Qwen3.5-35B-A3B M = 2 outlier of session 46 (H100: 27.1 us against 18.9 at M = 1
# and 30.2 at M = 3; 0.857x with GEMM2's wide mode off, 0.838x with both GEMMs in 8-warp blocks alone).
# Reading: at M = 2 GEMM1 plans 128 units (16 picks x 8 half-groups), under the 132-unit "few" bound,
# so it runs 256 8-warp blocks in split-K pairs: two per SM on nearly every SM, which leaves GEMM2's
# blocks (launched early by PDL) no room to request their weights until GEMM1's blocks retire;
# Qwen3 TP2's 96 units (192 blocks) leave 72 SMs a free slot. Test: GEMM1 alone forced to 8-warp
# blocks alone (LOWBIT_INT4_MOE_W13_SHAPE=8:1, new in 0a2731b+1) or 4-warp pairs (4:2), against the default,
# GEMM2's wide mode off, and both GEMMs 8-warp alone, on the five small-expert rows at M = 1..4
# (DeepSeek-V2-Lite TP2 at M = 2: 132 units, 264 blocks in pairs; DeepSeek-V2-Lite at M = 1: 132
# units). Three alternated passes, min over passes.
# Stage: cmake --build build --target lowbit_cli; D=.dev/s47p; mkdir -p $D && strip -o $D/lowbit build/bin/lowbit
# && xz -T2 -f $D/lowbit; git rev-parse HEAD > $D/COMMIT
# run(command="bash docs/benchmarks/logs/session47_raw/gpu_m2_probe.sh", carry=[".dev/s47p"])
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
B=.dev/s47p; S=$OUT/p; mkdir -p $S
cat $B/COMMIT > $S/commit.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $S/gpu.csv 2>&1; head -2 $S/gpu.csv
for f in $B/*.xz; do [ -f "$f" ] && xz -d -T8 "$f"; done; chmod +x $B/*
t0=$(date +%s)
SH=qwen3.5-35b-a3b,qwen3-30b-a3b.tp2,deepseek-v2-lite.tp2,deepseek-v2-lite,qwen3-30b-a3b.tp1
V=("def" "g81 LOWBIT_INT4_MOE_W13_SHAPE=8:1" "g42 LOWBIT_INT4_MOE_W13_SHAPE=4:2" "wide0 LOWBIT_INT4_MOE_WIDE=0" "w8s1 LOWBIT_INT4_DECODE_WARPS=8 LOWBIT_INT4_DECODE_SPLITS=1")
b() { local name=$1; shift; env "$@" timeout 60 $B/lowbit bench moe --shapes $SH --m 1,2,3,4 --reps 5 --out $S/$name > $S/$name.log 2>&1 || echo "$name rc $?"; }
for pass in 1 2 3; do
  [ $(( $(date +%s) - t0 )) -gt ${BUDGET:-400} ] && { echo "out of time before pass $pass"; break; }
  for v in "${V[@]}"; do set -- $v; name=$1; shift; b ${name}_$pass "$@"; done
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
done
grep -h "total #wrong" $S/*_[123].log | sort | uniq -c
python3 - "$S" <<'PY' || true
import json, glob, sys, collections
t = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(sys.argv[1] + '/*_[123].json'):
    name = f.rsplit('/', 1)[1].rsplit('_', 1)[0]
    d = json.load(open(f)); rows = d['rows'] if isinstance(d, dict) else d
    for r in rows: t[(r['shape'], r['M'])][name].append(r['time_us'])
names = ['def', 'g81', 'g42', 'wide0', 'w8s1']
print('shape M def_us ' + ' '.join(names[1:]))
for k in sorted(t):
    if not t[k]['def']: continue
    d = min(t[k]['def'])
    print(k[0], k[1], f"{d:.1f}", ' '.join(f"{min(t[k][n]) / d:.3f}" if t[k][n] else '-' for n in names[1:]))
PY
cd $OUT && tar czf m2_probe.tgz p && rm -rf p
