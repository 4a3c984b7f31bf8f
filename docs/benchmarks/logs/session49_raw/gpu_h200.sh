#!/usr/bin/env bash
# Session 49: the H200 round for the bounded GEMM1 rule's binaries (37ab2e4, .dev/s48r): only on an H200
# (exit 3 otherwise), session48_raw/gpu_verify.sh (the whole GPU int4 suite, then the rule's A/B), then
# the issue's MoE catalog at M = 1, 8, 16 with the rule on and off (LOWBIT_INT4_MOE_W13_ROOM=0), two
# alternated passes: the catalog table of session 47 (moe.md, 354c93a) predates the rule, and these rows
# should read the same under both settings (the rule applies to none of them).
# run(command="bash docs/benchmarks/logs/session49_raw/gpu_h200.sh", carry=[".dev/s48r"], kind="nvidia-h200")
set -u
nvidia-smi -L; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 3
export BIN=${BIN:-.dev/s48r}
SUITE_S=${SUITE_S:-200} PASS_S=${PASS_S:-60} bash docs/benchmarks/logs/session48_raw/gpu_verify.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 LOWBIT_SOURCE_DIR=$(pwd)
S=$OUT/c; mkdir -p $S; t0=$(date +%s); pack() { (cd $OUT && tar czf catalog.tgz c); }
echo "== C the catalog at M = 1, 8, 16, rule on / off"
for pass in 1 2; do
  for v in rule old; do
    e=LOWBIT_INT4_MOE_W13_ROOM=1; [ $v = old ] && e=LOWBIT_INT4_MOE_W13_ROOM=0
    env $e timeout 90 $BIN/lowbit bench moe --m 1,8,16 --reps 5 --out $S/${v}_$pass > $S/${v}_$pass.log 2>&1 || echo "${v}_$pass rc $?"
  done
  echo "pass $pass [$(( $(date +%s) - t0 )) s]"; pack
done
grep -h "total #wrong" $S/*_[12].log | sort | uniq -c
python3 - "$S" <<'PY' || true
import json, glob, sys, collections
t = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(sys.argv[1] + '/*_[12].json'):
    name = f.rsplit('/', 1)[1].split('_')[0]
    for r in json.load(open(f))['rows']: t[(r['shape'], r['M'])][name].append(r['time_us'])
for k in sorted(t):
    a, o = t[k]['rule'], t[k]['old']
    if a and o: print(k[0], k[1], f"rule {min(a):.1f} old {min(o):.1f} {min(a) / min(o):.3f}")
PY
pack; rm -rf $S
