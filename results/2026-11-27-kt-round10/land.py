import json,gzip,itertools,sys
f=sys.argv[1]
d=json.load(gzip.open(f))
keys=d['tune_params_keys']; tp=d['tune_params']
idx={k:{str(v):i for i,v in enumerate(tp[k])} for k in keys}
T={}
for k,e in d['cache'].items():
    t=e.get('time')
    if isinstance(t,(int,float)):
        vals=k.split(',')
        T[tuple(idx[kk][v] for kk,v in zip(keys,vals))]=t
sizes=[len(tp[k]) for k in keys]
opt=min(T.values())
def steps(c):
    for i in range(len(c)):
        for dlt in (-1,1):
            v=c[i]+dlt
            if 0<=v<sizes[i]:
                yield c[:i]+(v,)+c[i+1:]
def steps2(c):
    out=set()
    for n in steps(c):
        out.add(n)
        for m in steps(n):
            if m!=c: out.add(m)
    return out
def descend(c,nb):
    while True:
        best=c
        for n in nb(c):
            if n in T and T[n]<T[best]: best=n
        if best==c: return c
        c=best
res={}
for nbname,nb in (('1step',lambda c:list(steps(c))),('2step',steps2)):
    ends={}
    for c in T:
        e=descend(c,nb); ends[e]=ends.get(e,0)+1
    top=sorted(ends.items(),key=lambda x:-x[1])[:6]
    n2=sum(len([n for n in nb(c)]) for c in list(T)[:200])/200
    print(nb and nbname, 'local optima',len(ends),'mean nbhood',round(n2,1),'to optimum %.3f'%(sum(v for k,v in ends.items() if opt/T[k]>0.98)/len(T)),
          'mean frac %.3f'%(sum(v*opt/T[k] for k,v in ends.items())/len(T)))
    for k,v in top: print('   ',round(opt/T[k],3),v)
print('product',eval('*'.join(map(str,sizes))),'valid',len(T))
