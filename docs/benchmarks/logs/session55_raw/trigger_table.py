#!/usr/bin/env python3
"""Session 55: min over passes of time_us per (shape, M) for each LOWBIT_INT4_MOE_TRIGGER setting,
and each setting's time over the baseline's (BASE, default 00). Usage: trigger_table.py DIR [BASE]
(DIR: the g/ folder of gpu_moe_trigger.sh)."""
import glob, json, os, sys
from collections import defaultdict

d = sys.argv[1]
base = sys.argv[2] if len(sys.argv) > 2 else '00'
best = defaultdict(dict)
for p in sorted(glob.glob(os.path.join(d, 't*_[0-9].json'))):
    cfg = os.path.basename(p).rsplit('_', 1)[0][1:]
    for r in json.load(open(p))['rows']:
        assert r['wrong'] == 0, (p, r['shape'], r['M'])
        k = (r['shape'], r['M'])
        best[k][cfg] = min(best[k].get(cfg, 1e30), r['time_us'])
cfgs = sorted({c for v in best.values() for c in v})
print('| shape | M | ' + ' | '.join(f'{c} (us)' for c in cfgs) + ' | ' + ' | '.join(f'{c}/{base}' for c in cfgs if c != base) + ' |')
print('|---|---|' + '---|' * (2 * len(cfgs) - 1))
for (s, m), v in sorted(best.items()):
    t = ' | '.join(f"{v[c]:.1f}" if c in v else '-' for c in cfgs)
    r = ' | '.join(f"{v[c] / v[base]:.3f}" if c in v and base in v else '-' for c in cfgs if c != base)
    print(f'| {s} | {m} | {t} | {r} |')
