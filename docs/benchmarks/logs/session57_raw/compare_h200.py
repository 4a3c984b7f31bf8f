#!/usr/bin/env python3
"""Session 57: the new H200 tables (DIR, binaries b1b84f8) against the committed ones (docs/benchmarks, earlier
H200 runs), row by row on (shape, M, dtype, group): time ratio new / old, and the rows that moved past +-TOL.
Usage: compare_h200.py NEW_DIR OLD_DIR [TOL=0.03]."""
import json, os, sys

new_dir, old_dir = sys.argv[1], sys.argv[2]
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 0.03
for name in ('gemm', 'moe', 'gemm_tp_shards', 'moe_models'):
    pn, po = os.path.join(new_dir, name + '.json'), os.path.join(old_dir, name + '.json')
    if not (os.path.exists(pn) and os.path.exists(po)):
        continue
    jn, jo = json.load(open(pn)), json.load(open(po))
    key = lambda r: (r['shape'], r['M'], r.get('dtype'), r.get('group'), r.get('path'))
    old = {key(r): r for r in jo['rows']}
    new = {key(r): r for r in jn['rows']}
    pairs = [(key(r), r['time_us'] / old[key(r)]['time_us']) for r in jn['rows'] if key(r) in old]
    within = sum(1 for _, q in pairs if abs(q - 1) <= tol)
    qs = [q for _, q in pairs]
    print(f"{name}: new {jn['commit']} {jn['date']} vs old {jo['commit']} {jo['date']}: {len(pairs)} rows paired, "
          f"{within} within {tol:.0%}, ratio {min(qs):.3f}-{max(qs):.3f}")
    for k, q in pairs:
        if abs(q - 1) > tol:
            print(f"  {k[0]} M={k[1]} {k[2]} G={k[3]}: {old[k]['time_us']:.1f} -> {new[k]['time_us']:.1f} us ({q:.3f})")
