#!/usr/bin/env python3
# Checks the 96- / 128-row cost model of pipelined_rows_for (kernels/int4/pipelined_plan.h,
# session 29) against forced-row bench JSONs: args rows96.json:rows128.json ... ; prints the
# misses and the near-ties. Usage as in docs/int4-kernels-sessions.md "Session 29".
import json,sys
def plan(m,n,k,bm,sms=132,bps=1):
    rt=(m+bm-1)//bm; ct=(n//64+3)//4; ks=k//16
    minsteps=64 if bm==64 else 16
    splits=1
    units=rt*ct; wave=bps*sms
    while splits<8 and units*(splits+1)<=wave and ks//(splits+1)>=minsteps: splits+=1
    per=(ks+splits-1)//splits; ss=(per+3)//4*4; splits=(ks+ss-1)//ss
    return rt,ct,splits,ss
def cost(p,sms=132):
    rt,ct,sp,ss=p; b=rt*ct*sp; return ((b+sms-1)//sms)*ss
shapes={'8b.qkv':(6144,4096),'8b.o':(4096,4096),'8b.gate_up':(28672,4096),'8b.down':(4096,14336),
 '70b.qkv':(10240,8192),'70b.o':(8192,8192),'70b.gate_up':(57344,8192),'70b.down':(8192,28672)}
def load(p):
    d=json.load(open(p)); rows=d['rows'] if isinstance(d,dict) else d
    return {(r['shape'].replace('llama3-',''),r['M']):r['time_us'] for r in rows}
pairs=[a.split(':') for a in sys.argv[1:]]
ok=bad=0
for f96,f128 in pairs:
    A=load(f96);B=load(f128)
    for key in sorted(A):
        if key not in B: continue
        s,m=key; n,k=shapes[s]
        pick=96 if 0.91*cost(plan(m,n,k,96))<cost(plan(m,n,k,128)) else 128
        best=96 if A[key]<B[key] else 128
        r=A[key]/B[key]
        flag='' if pick==best else '  <-- MISS'
        if pick==best: ok+=1
        else: bad+=1
        if flag or abs(r-1)<0.05: print(f96.split('/')[-2] if '/' in f96 else f96, s,m,f"96/128={r:.3f} pick {pick}{flag}")
print('ok',ok,'miss',bad)
