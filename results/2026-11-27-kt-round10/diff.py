import gzip,json,glob,os,sys,statistics as st
OUT=os.environ.get('OUT','out')
def opener(p):
    import os.path
    if os.path.exists(p+'.gz'): p=p+'.gz'
    return gzip.open(p,'rt') if p.endswith('.gz') else open(p)
B=[25,50,100,200,400,800,1600]
def L(l,n):
    try:
        d=json.load(opener(f'{OUT}/{l}/{n}.json'))
    except Exception: return None
    s=d['comparison']['strategies'][0]; return [b['mean_fraction'] for b in s['budgets']]
for l in sys.argv[1:]:
    for g,sel in (('drop',lambda n:'without' in n),('sub',lambda n:('without' not in n and n not in ('convolution_A100','GEMM_A100')))):
        ns=[os.path.basename(f).split('.json')[0] for f in glob.glob(f'{OUT}/{l}/*.json*')]
        ds=[]
        for n in ns:
            if not sel(n): continue
            a,b=L('base',n),L(l,n)
            if a and b: ds.append([y-x for x,y in zip(a,b)])
        if len(ds)<2: continue
        m=[st.mean(c) for c in zip(*ds)]; se=[st.stdev(c)/len(ds)**0.5 for c in zip(*ds)]
        print(f'| {g} ({len(ds)}) | {l} | '+' | '.join(f'{x:+.3f} ± {e:.3f}' for x,e in zip(m,se))+' |')
