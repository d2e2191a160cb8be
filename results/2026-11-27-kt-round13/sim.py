"""Plain strategies under the published protocol, on Kernel Tuner cache files (evo/NOTES.md, round 13).

usage: python3 sim.py climb FILE.json.gz...   random sampling, and k uniform samples then one-knob
                                              mutations of the best (one at a time, or 8 together);
                                              mean fraction of the optimum at 25/50 by kind, seeds 0..299
       python3 sim.py ga FILE.json.gz...      a model of evo's breeding without the screen: k samples,
                                              then generations of lam children (tournament, uniform
                                              crossover, one-knob mutation) from a pool of the best popn;
                                              at 25/50/100/200, seeds 0..149
A config absent from the file or failed in it costs an evaluation and yields nothing; a budget
counts distinct configs. Not evotune: a check on where evo's early evaluations go.
"""
import gzip, json, os, random, statistics as st, sys
def load(f):
    d=json.load(gzip.open(f))
    keys=d['tune_params_keys']; tp=d['tune_params']
    vals=[tp[k] for k in keys]
    times={}
    for k,e in d['cache'].items():
        t=e.get('time')
        if isinstance(t,(int,float)):
            times[k]=t
    strv=[[str(v) for v in vs] for vs in vals]
    T={}
    for k,t in times.items():
        parts=k.split(',')
        try: T[tuple(strv[i].index(p) for i,p in enumerate(parts))]=t
        except ValueError: pass
    return [len(v) for v in vals],T
class Run:
    def __init__(s,n,T,rng,budget):
        s.n,s.T,s.rng,s.budget=n,T,rng,budget; s.seen={}; s.best=None; s.bestc=None; s.trace=[]
    def ev(s,c):
        if c in s.seen: return s.seen[c]
        if len(s.seen)>=s.budget: raise StopIteration
        t=s.T.get(c); s.seen[c]=t
        if t is not None and (s.best is None or t<s.best): s.best,s.bestc=t,c
        s.trace.append(s.best)
        return t
    def rand(s): return tuple(s.rng.randrange(k) for k in s.n)
def strat_random(r):
    while True: r.ev(r.rand())
def strat_rs_then_climb(k, step):
    def f(r):
        for _ in range(k): r.ev(r.rand())
        while True:
            if r.bestc is None: r.ev(r.rand()); continue
            c=list(r.bestc); i=r.rng.choice([j for j in range(len(r.n)) if r.n[j]>1])
            if step:
                d=r.rng.choice([-1,1]); v=c[i]+d
                if v<0 or v>=r.n[i]: v=c[i]-d
            else:
                v=r.rng.randrange(r.n[i]-1); v+= v>=c[i]
            c[i]=v; c=tuple(c)
            if c in r.seen:
                # try random instead occasionally
                if r.rng.random()<0.2: r.ev(r.rand())
                continue
            r.ev(c)
    return f
def mutate1(r,c):
    # c with one knob (of two or more values) moved to another value, uniformly
    c=list(c); i=r.rng.choice([j for j in range(len(r.n)) if r.n[j]>1])
    v=r.rng.randrange(r.n[i]-1); v+= v>=c[i]; c[i]=v
    return tuple(c)
def evaluate_batch(r,lam,tries,make):
    # up to lam distinct unseen configs from make() in at most tries draws (a sample if none),
    # evaluated together: none of them sees another's result
    batch=[]
    for _ in range(tries):
        if len(batch)>=lam: break
        c=make()
        if c not in r.seen and c not in batch: batch.append(c)
    if not batch: batch=[r.rand()]
    for c in batch: r.ev(c)
def strat_batch(k,lam):
    # k uniform samples, then batches of lam one-knob mutations of the best, proposed together
    def f(r):
        for _ in range(k): r.ev(r.rand())
        while True:
            if r.bestc is None: r.ev(r.rand()); continue
            b=r.bestc
            evaluate_batch(r,lam,200,lambda: mutate1(r,b))
    return f
def strat_ga(tour,cx,k=8,lam=8,popn=8):
    def f(r):
        for _ in range(k): r.ev(r.rand())
        while True:
            pop=sorted([(t,c) for c,t in r.seen.items() if t is not None])[:popn]
            if len(pop)<2:
                for _ in range(lam): r.ev(r.rand())
                continue
            def pick():
                return pop[min(r.rng.randrange(len(pop)) for _ in range(tour))][1]
            def child():
                a=pick()
                if r.rng.random()<cx:
                    b=pick(); a=tuple(x if r.rng.random()<0.5 else y for x,y in zip(a,b))
                return mutate1(r,a)
            evaluate_batch(r,lam,300,child)
    return f

def run(strat,n,T,seed,B,budgets):
    r=Run(n,T,random.Random(seed),B)
    try: strat(r)
    except StopIteration: pass
    opt=min(T.values())
    tr=r.trace+[r.trace[-1]]*(B-len(r.trace))
    return [opt/tr[b-1] if tr[b-1] else 0 for b in budgets]
def main():
    mode,files=sys.argv[1],sys.argv[2:]
    if mode=='climb':
        strats={'random':strat_random}
        for k in (4,8,12,16):
            strats['rs%d+mut'%k]=strat_rs_then_climb(k,False)
            strats['rs%d+step'%k]=strat_rs_then_climb(k,True)
        strats['rs8+b8']=strat_batch(8,8)
        budgets,seeds=(25,50),300
    elif mode=='ga':
        strats={'t3 b8 p8':strat_ga(3,0.5),'t3 b4 p8':strat_ga(3,0.5,lam=4),'t3 b2 p8':strat_ga(3,0.5,lam=2),'t3 b1 p8':strat_ga(3,0.5,lam=1),'t3 b4 p4':strat_ga(3,0.5,lam=4,popn=4),'t3 b2 p2':strat_ga(3,0.5,lam=2,popn=2)}
        budgets,seeds=(25,50,100,200),150
    else:
        sys.exit('usage: sim.py climb|ga FILE.json.gz...')
    res={}
    for f in files:
        n,T=load(f); name=os.path.basename(f)[:-len('.json.gz')]
        for sn,s in strats.items():
            v=[run(s,n,T,seed,budgets[-1],budgets) for seed in range(seeds)]
            res.setdefault(sn,{})[name]=[st.mean(x[i] for x in v) for i in range(len(budgets))]
    for sn in strats:
        line=sn.ljust(12)
        for k in ('GEMM','convolution','pnpoly'):
            xs=[v for nm,v in res[sn].items() if nm.startswith(k)]
            line+='  %s '%k[:4]+'/'.join('%.3f'%st.mean(x[i] for x in xs) for i in range(len(budgets)))
        print(line)
if __name__=='__main__':
    main()
