#!/usr/bin/env python3
"""Session 52: min over passes of each config's time_us per (shape, M), relative to the plan's.
Usage: warps_table.py DIR (the w/ folder of gpu_moe_warps.sh)."""
import glob, json, os, sys
from collections import defaultdict

d = sys.argv[1]
best = defaultdict(dict)
for p in sorted(glob.glob(os.path.join(d, '*_[0-9].json'))):
    cfg = os.path.basename(p).rsplit('_', 1)[0]
    for r in json.load(open(p))['rows']:
        k = (r['shape'], r['M'])
        assert r['wrong'] == 0, (p, k)
        best[k][cfg] = min(best[k].get(cfg, 1e30), r['time_us'])
cfgs = ['w8', 'w13e8']
print('| shape | M | plan (us) | ' + ' | '.join(cfgs) + ' |')
print('|---|---|---|' + '---|' * len(cfgs))
for (s, m), v in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    print(f"| {s} | {m} | {v['def']:.1f} | " + ' | '.join(f"{v[c] / v['def']:.3f}" if c in v else '-' for c in cfgs) + ' |')
