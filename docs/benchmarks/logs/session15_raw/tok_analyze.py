import csv, statistics as st, sys
for name in sys.argv[1:]:
    rows=[{k:int(v) for k,v in r.items()} for r in csv.DictReader(open(name))]
    rows.sort(key=lambda r:r['entry'])
    groups=[];cur=[]
    for r in rows:
        if cur and r['entry']-cur[0]['entry']>5000: groups.append(cur);cur=[]
        cur.append(r)
    groups.append(cur)
    print(name, 'launches', len(groups), 'records/launch', st.median([len(g) for g in groups]))
    res={k:[] for k in ['entry','topk','routed','gridsync','g1done','g1pub','g2ready','end']}
    per=[]
    for i,gp in enumerate(groups[1:-1]):
        t0=min(r['entry'] for r in gp)
        for k in res:
            v=[r[k]-t0 for r in gp if r[k]>0]
            if v: res[k].append((min(v)/1e3, st.median(v)/1e3, max(v)/1e3))
        per.append((groups[i+2][0]['entry']-t0)/1e3)
    print('  period', st.median(per))
    for k,v in res.items():
        if v: print(f'  {k:8s} min {st.median([x[0] for x in v]):6.2f} med {st.median([x[1] for x in v]):6.2f} max {st.median([x[2] for x in v]):6.2f}  (n={len(v)})')
