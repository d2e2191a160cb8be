import json,sys,os,glob,gzip,collections
# usage: tab.py LABEL=dir[,dir...] ...   each dir holds NAME[.first].json[.gz]; runs of one name merged weighted by seeds
study={'GEMM':['GTX_Titan_X','TITAN_RTX','V100','K20'],'convolution':['GTX_Titan_X','TITAN_RTX','V100','K20','MI50'],'pnpoly':['A100','GTX_Titan_X','TITAN_RTX','V100','K20']}
def rd(p):
    op=gzip.open if p.endswith('.gz') else open
    with op(p,'rt') as f: return json.load(f)
def load(dirs):
    acc=collections.defaultdict(lambda: collections.defaultdict(float)); n=collections.defaultdict(int)
    for d in dirs:
        for p in glob.glob(d+'/*.json*'):
            x=rd(p); name=os.path.basename(p).split('.')[0]
            s=[s for s in x['comparison']['strategies'] if s['strategy']=='evo'][0]
            k=x['seeds']; n[name]+=k
            for b in s['budgets']: acc[name][b['budget']]+=k*b['mean_fraction']
    return {nm:{b:v/n[nm] for b,v in d.items()} for nm,d in acc.items()}, n
data={};L=[]
for a in sys.argv[1:]:
    lab,dirs=a.split('=',1); data[lab]=load(dirs.split(',')); L.append(lab)
mode=os.environ.get('MODE','kt')
if mode=='rp':
    names=sorted(set().union(*[set(data[l][0]) for l in L]))
    for nm in names:
        for l in L:
            r,n=data[l]
            if nm in r: print(f'| {nm} | {l} ({n[nm]} seeds) | '+' | '.join(f'{r[nm][b]:.4f}' for b in sorted(r[nm]))+' |')
    sys.exit()
for l in L:
    r,n=data[l]; buds=sorted(r['GEMM_V100'].keys())
    def m(names,b): v=[r[x][b] for x in names if x in r]; return sum(v)/len(v) if v else float('nan')
    st=[f'{k}_{g}' for k,gs in study.items() for g in gs]
    plain=[m(st,b) for b in buds]
    w=[(6*m([f'GEMM_{g}' for g in study['GEMM']],b)+6*m([f'convolution_{g}' for g in study['convolution']],b)+5*m([f'pnpoly_{g}' for g in study['pnpoly']],b))/17 for b in buds]
    print(f'| {l}, 14 study spaces ({sum(1 for x in st if x in r)}) | '+' | '.join(f'{v:.4f}' for v in plain)+' |')
    print(f'| {l}, kinds weighted 6/6/5 | '+' | '.join(f'{v:.4f}' for v in w)+' |')
    for k in ['GEMM','convolution','pnpoly']:
        ks=sorted(x for x in r if x.startswith(k))
        print(f'| {l}, all {k} ({len(ks)}) | '+' | '.join(f'{m(ks,b):.4f}' for b in buds)+' |')
