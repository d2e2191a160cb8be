import gzip,json,sys,glob,os
labels=sys.argv[1:]
OUT=os.environ.get('OUT','out')
def opener(p):
    import os.path
    if os.path.exists(p+'.gz'): p=p+'.gz'
    return gzip.open(p,'rt') if p.endswith('.gz') else open(p)
B=[25,50,100,200,400,800,1600]
def load(l):
    R={}
    for f in glob.glob(f'{OUT}/{l}/*.json*'):
        try: d=json.load(opener(f))
        except Exception: continue
        s=[x for x in d['comparison']['strategies'] if x['strategy']=='evo'][0]
        R[os.path.basename(f).split('.json')[0]]={b['budget']:b['mean_fraction'] for b in s['budgets']}
    return R
D={l:load(l) for l in labels}
names=sorted(set.intersection(*[set(D[l]) for l in labels]))
groups={'conv':[n for n in names if n=='convolution_A100'],'gemm':[n for n in names if n=='GEMM_A100'],
 'drop':[n for n in names if 'without' in n],'sub':[n for n in names if ('without' not in n and n not in ('convolution_A100','GEMM_A100'))]}
for g,ns in groups.items():
    if not ns: continue
    for l in labels:
        m=[sum(D[l][n][b] for n in ns)/len(ns) for b in B]
        print(f'{g:5s} n={len(ns):2d} {l:10s}',' '.join(f'{x:.3f}' for x in m))
