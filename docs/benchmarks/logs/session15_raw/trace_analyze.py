import csv, sys, statistics as st
def load(p):
    rows=[]
    for r in csv.DictReader(open(p)):
        rows.append({k:int(v) for k,v in r.items()})
    return rows
def layers(rows):
    # a layer starts at a GEMM1 (mode 1) block whose entry is > 3 us after the previous GEMM1 entry
    g1=sorted([r for r in rows if r['mode']==1], key=lambda r:r['entry'])
    starts=[]
    last=None
    for r in g1:
        if last is None or r['entry']-last>3000: starts.append(r['entry'])
        last=r['entry']
    return starts
def pct(v,q): 
    v=sorted(v); return v[min(len(v)-1,int(q*len(v)))] if v else -1
def summarize(p):
    rows=load(p)
    starts=layers(rows)
    print(p, 'layers', len(starts))
    out=[]
    for i in range(1,len(starts)-1):
        t0=starts[i]; t1=starts[i+1]
        L=[r for r in rows if t0-500<=r['entry']<t1-500 ]
        g1=[r for r in L if r['mode']==1]; g2=[r for r in L if r['mode']==2]
        def rel(rs,k,q): 
            v=[r[k]-t0 for r in rs if r[k]>0]
            return pct(v,q)/1000 if v else -1
        d=dict(period=(t1-t0)/1000, n1=len(g1), n2=len(g2))
        for name,rs in (('g1',g1),('g2',g2)):
            for k in ('entry','routed','waited','first','loop','end'):
                d[f'{name}.{k}']=(rel(rs,k,0.0),rel(rs,k,0.5),rel(rs,k,0.999))
        out.append(d)
    # median over layers
    keys=out[0].keys()
    print(f"  period med {st.median([o['period'] for o in out]):.2f} us; blocks g1 {out[0]['n1']} g2 {out[0]['n2']}")
    for name in ('g1','g2'):
        for k in ('entry','routed','waited','first','loop','end'):
            a=[o[f'{name}.{k}'] for o in out]
            print(f"  {name}.{k:7s} min {st.median([x[0] for x in a]):6.2f}  med {st.median([x[1] for x in a]):6.2f}  max {st.median([x[2] for x in a]):6.2f}")
for p in sys.argv[1:]: summarize(p)
