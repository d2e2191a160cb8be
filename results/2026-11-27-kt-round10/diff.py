# Difference from base per proxy, mean ± standard error over spaces: OUT=DIR python3 diff.py LABEL...
import sys,statistics as st
from tab import load,group
base=load('base')
for l in sys.argv[1:]:
    runs=load(l)
    for g in ('drop','sub'):
        ds=[[y-x for x,y in zip(base[n],runs[n])] for n in runs if group(n)==g and n in base]
        if len(ds)<2: continue
        m=[st.mean(c) for c in zip(*ds)]; se=[st.stdev(c)/len(ds)**0.5 for c in zip(*ds)]
        print(f'| {g} ({len(ds)}) | {l} | '+' | '.join(f'{x:+.3f} ± {e:.3f}' for x,e in zip(m,se))+' |')
