#!/usr/bin/env python3
"""Session 52: min over passes of time_us per (dtype, shape, M), rule on against off.
Usage: onoff_table.py DIR (the l/ folder of gpu_moe_large.sh)."""
import glob, json, os, sys
from collections import defaultdict

d = sys.argv[1]
best = defaultdict(dict)
for p in sorted(glob.glob(os.path.join(d, '*-o*_[0-9].json'))):
    dt, cfg = os.path.basename(p).rsplit('_', 1)[0].split('-')
    for r in json.load(open(p))['rows']:
        assert r['wrong'] == 0, (p, r['shape'], r['M'])
        k = (dt, r['shape'], r['M'])
        best[k][cfg] = min(best[k].get(cfg, 1e30), r['time_us'])
print('| dtype | shape | M | off (us) | on (us) | on / off |')
print('|---|---|---|---|---|---|')
for (dt, s, m), v in sorted(best.items()):
    if 'on' in v and 'off' in v:
        print(f"| {dt} | {s} | {m} | {v['off']:.1f} | {v['on']:.1f} | {v['on'] / v['off']:.3f} |")
