#!/usr/bin/env python3
"""Session 58: min over passes of time_us per (knob, shape, M), over the default's. Usage: knob_table.py DIR
(the k/ folder of gpu_moe_knobs.sh). moe_knobs_h100.md came from two calls on one warm H100: pass 1 and 2 are
moe_knobs_h100_pass12.tgz's k/*_{1,2}.json, pass 3 is moe_knobs_h100_pass3.tgz's k/*_1.json renamed *_3.json."""
import glob, json, os, sys
from collections import defaultdict

best = defaultdict(dict)  # (shape, M) -> knob -> min time
for p in sorted(glob.glob(os.path.join(sys.argv[1], '*_[0-9].json'))):
    knob = os.path.basename(p).rsplit('_', 1)[0]
    for r in json.load(open(p))['rows']:
        assert r['wrong'] == 0, (p, r['shape'], r['M'])
        k = (r['shape'], r['M'])
        best[k][knob] = min(best[k].get(knob, 1e30), r['time_us'])
knobs = sorted({kn for v in best.values() for kn in v if kn != 'default'})
print('| shape | M | default (us) | ' + ' | '.join(knobs) + ' |')
print('|---|---|---|' + '---|' * len(knobs))
for (s, m), v in sorted(best.items()):
    d = v.get('default')
    if d is None:
        continue
    cells = [f"{v[kn] / d:.3f}" if kn in v else '-' for kn in knobs]
    print(f"| {s} | {m} | {d:.1f} | " + ' | '.join(cells) + ' |')
