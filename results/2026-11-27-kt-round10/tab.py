# Mean fraction of the optimum per proxy group: OUT=DIR python3 tab.py LABEL...
import gzip,json,sys,glob,os
OUT=os.environ.get('OUT','out')
B=[25,50,100,200,400,800,1600]

def group(n):
    if n in ('convolution_A100','GEMM_A100'): return {'convolution_A100':'conv','GEMM_A100':'gemm'}[n]
    return 'drop' if 'without' in n else 'sub'

def load(l):
    """Each space's evo mean fraction per budget, for the runs labelled l."""
    R={}
    for f in glob.glob(f'{OUT}/{l}/*.json*'):
        try: d=json.load(gzip.open(f,'rt') if f.endswith('.gz') else open(f))
        except Exception: continue  # a run still being written
        s=[x for x in d['comparison']['strategies'] if x['strategy']=='evo'][0]
        R[os.path.basename(f).split('.json')[0]]=[b['mean_fraction'] for b in s['budgets']]
    return R

if __name__=='__main__':
    labels=sys.argv[1:]
    D={l:load(l) for l in labels}
    names=sorted(set.intersection(*[set(D[l]) for l in labels]))
    for g in ('conv','gemm','drop','sub'):
        ns=[n for n in names if group(n)==g]
        if not ns: continue
        for l in labels:
            m=[sum(D[l][n][i] for n in ns)/len(ns) for i in range(len(B))]
            print(f'{g:5s} n={len(ns):2d} {l:10s}',' '.join(f'{x:.3f}' for x in m))
