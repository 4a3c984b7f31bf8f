#!/usr/bin/env python3
"""Session 61: a rule on against off, min of time_us over alternated passes per (bench, shape, M),
from gpu_bench.sh's x/ folder (gemm_e{0,1}_p*.json, moe_e{0,1}_p*.json; e1 = the rule, e0 = off).
Writes OUT.md, OUT.json and OUT.png. Usage: onoff_table.py DIR OUT TITLE [NOTE]"""
import glob, json, os, sys
from collections import defaultdict

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt

d, out, title = sys.argv[1], sys.argv[2], sys.argv[3]
note = sys.argv[4] if len(sys.argv) > 4 else ''
best = defaultdict(dict)
meta = None
for p in sorted(glob.glob(os.path.join(d, '*_e[01]_p*.json'))):
    bench, e = os.path.basename(p).split('_')[:2]
    j = json.load(open(p))
    meta = meta or {k: j[k] for k in ('commit', 'date', 'machine', 'copy_gbps')}
    for r in j['rows']:
        if r['wrong'] != 0:
            sys.exit(f"{p}: {r['shape']} M={r['M']}: #wrong {r['wrong']}")
        k = (bench, r['shape'], r['M'])
        best[k][e] = min(best[k].get(e, 1e30), r['time_us'])
        best[k]['floor_us'] = r['floor_us']
rows = [dict(bench=b, shape=s, M=m, off_us=v['e0'], on_us=v['e1'], ratio=v['e1'] / v['e0'],
             pct_floor_on=100 * v['floor_us'] / v['e1'], pct_floor_off=100 * v['floor_us'] / v['e0'])
        for (b, s, m), v in sorted(best.items()) if 'e0' in v and 'e1' in v]
passes = len(glob.glob(os.path.join(d, 'gemm_e1_p*.json')))
with open(out + '.md', 'w') as f:
    f.write(f"# {title}\n\n{meta['date']}, commit {meta['commit'][:12]}, {meta['machine']}, copy bandwidth "
            f"{meta['copy_gbps']:.0f} GB/s; min of {passes} alternated passes; #wrong 0 on every row\n\n")
    if note:
        f.write(note + '\n\n')
    f.write('| bench | shape | M | off (us) | on (us) | on / off | %floor off | %floor on |\n|---|---|---|---|---|---|---|---|\n')
    for r in rows:
        f.write(f"| {r['bench']} | {r['shape']} | {r['M']} | {r['off_us']:.2f} | {r['on_us']:.2f} | {r['ratio']:.3f} | "
                f"{r['pct_floor_off']:.1f} | {r['pct_floor_on']:.1f} |\n")
json.dump(dict(title=title, note=note, passes=passes, **meta, rows=rows), open(out + '.json', 'w'), indent=1)
fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(rows)), 4.5))
ax.bar(range(len(rows)), [r['ratio'] for r in rows], color=['C0' if r['ratio'] <= 1 else 'C3' for r in rows])
ax.axhline(1.0, color='k', lw=0.8)
ax.set_xticks(range(len(rows)), [f"{r['shape']} M={r['M']}" for r in rows], rotation=90, fontsize=7)
ax.set_ylabel('time on / off (lower: the rule wins)')
ax.set_ylim(min(0.9, min(r['ratio'] for r in rows) - 0.02), max(1.05, max(r['ratio'] for r in rows) + 0.02))
ax.set_title(f"{title}\n{meta['machine']}, {meta['date']}, {meta['commit'][:12]}", fontsize=9)
fig.tight_layout()
fig.savefig(out + '.png', dpi=110)
