#!/usr/bin/env python3
"""Compare a setting against a baseline from `lowbit bench gemm` / `lowbit bench moe` runs that alternated them.

DIR holds the runs' JSON files named LABEL_e1_pN.json (the setting) and LABEL_e0_pN.json (the baseline, in the same
binaries), N the pass; LABEL names a group (a bench, a dtype). Per (LABEL, shape, M) the minimum time_us over the
passes of each side is taken; any row with #wrong != 0 stops the script. Writes OUT.md (with date, commit and
machine from the runs), OUT.json and OUT.png (on / off per row).
Usage: compare_bench.py DIR OUT TITLE [NOTE]
(First written for session 61's plan changes, docs/benchmarks/logs/session61_raw/gpu_*.sh.)
"""
import glob, json, os, sys
from collections import defaultdict

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt

d, out, title = sys.argv[1], sys.argv[2], sys.argv[3]
note = sys.argv[4] if len(sys.argv) > 4 else ''
best = defaultdict(dict)
meta = None
per_label = defaultdict(int)  # passes per LABEL and side (the table states each LABEL's fewer side)
for p in sorted(glob.glob(os.path.join(d, '*_e[01]_p*.json'))):
    bench, e = os.path.basename(p).split('_')[:2]
    per_label[(bench, e)] += 1
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
passes = {b: min(per_label[(b, 'e0')], per_label[(b, 'e1')]) for b in sorted({b for b, _ in per_label})}
counts = sorted(set(passes.values()))
passes_text = (f"min of {counts[0]} alternated passes" if len(counts) == 1 else
               "min of " + ", ".join(f"{n} ({b})" for b, n in passes.items()) + " alternated passes")
with open(out + '.md', 'w') as f:
    f.write(f"# {title}\n\n{meta['date']}, commit {meta['commit'][:12]}, {meta['machine']}, copy bandwidth "
            f"{meta['copy_gbps']:.0f} GB/s; {passes_text}; #wrong 0 on every row\n\n")
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
