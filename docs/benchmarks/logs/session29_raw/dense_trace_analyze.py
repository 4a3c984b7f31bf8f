#!/usr/bin/env python3
"""Timeline of the dense decode GEMM from a -DLOWBIT_INT4_TRACE=1 build's records
(bench gemm with LOWBIT_INT4_TRACE_OUT=prefix; one CSV per shape and M, one record per block:
mode,bx,by,bz,smid,entry,routed(=weight pointer),waited,first,loop,end in ns of %globaltimer).
Launches are told apart by their weight pointer (the bench rotates copies) and by time.
Prints, as medians over launches, each phase in us relative to the launch's first block entry
and the hand-off from the previous launch's last block end."""
import csv, statistics as st, sys
from collections import defaultdict

def launches(path):
    recs = [dict((k, int(v)) for k, v in r.items()) for r in csv.DictReader(open(path))]
    by_ptr = defaultdict(list)
    for r in recs: by_ptr[r['routed']].append(r)
    out = []
    for ptr, rs in by_ptr.items():
        rs.sort(key=lambda r: r['entry'])
        cur = [rs[0]]
        for r in rs[1:]:
            if r['entry'] - cur[-1]['entry'] > 20000: out.append(cur); cur = [r]
            else: cur.append(r)
        out.append(cur)
    out.sort(key=lambda l: min(r['entry'] for r in l))
    return out

def summarize(path):
    ls = launches(path)
    nblk = st.median(len(l) for l in ls)
    ls = [l for l in ls if len(l) == nblk]  # whole launches only (the ring may cut the first)
    rows = []
    for i, l in enumerate(ls):
        t0 = min(r['entry'] for r in l)
        f = lambda k, agg: (agg(r[k] for r in l) - t0) / 1000.0
        d = dict(entry_last=f('entry', max), waited_min=f('waited', min), waited_max=f('waited', max),
                 first_min=f('first', min), first_max=f('first', max), loop_max=f('loop', max),
                 end_min=f('end', min), end_max=f('end', max))
        if i > 0:
            p = ls[i - 1]; pt0 = min(r['entry'] for r in p); pend = max(r['end'] for r in p)
            d['period'] = (t0 - pt0) / 1000.0
            d['entry_after_prev_end'] = (t0 - pend) / 1000.0
            d['waited_after_prev_end'] = (min(r['waited'] for r in l) - pend) / 1000.0
        d['epilogue_med'] = st.median((r['end'] - r['loop']) / 1000.0 for r in l)
        d['first_to_loop_med'] = st.median((r['loop'] - r['first']) / 1000.0 for r in l)
        rows.append(d)
    keys = ['period', 'entry_after_prev_end', 'waited_after_prev_end', 'entry_last', 'first_min', 'first_max',
            'waited_min', 'waited_max', 'loop_max', 'end_min', 'end_max', 'epilogue_med', 'first_to_loop_med']
    print(f"{path}: {len(ls)} launches of {nblk} blocks")
    for k in keys:
        v = [r[k] for r in rows if k in r]
        if v: print(f"  {k:24s} median {st.median(v):7.2f}  p10 {sorted(v)[len(v)//10]:7.2f}  p90 {sorted(v)[9*len(v)//10]:7.2f}")

for p in sys.argv[1:]: summarize(p)
