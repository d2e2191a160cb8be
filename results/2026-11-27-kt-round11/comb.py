# Each try against the default over seeds 1..100 (two runs of 50 seeds), per proxy group, as markdown rows:
#   python3 comb.py DIR/BASE1:DIR/BASE2 DIR/TRY1:DIR/TRY2 ...
# where DIR/LABEL is a folder of bench-search JSON (gzip allowed), one file per space, and each try is
# set against the first pair: the mean over spaces, then the difference's mean ± its standard error over spaces.
import math, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '2026-11-27-kt-round10'))
import tab

def load(path):
    tab.OUT, label = os.path.split(path)
    return tab.load(label)

def both(p1, p2):
    a, b = load(p1), load(p2)
    return {n: [(x + y) / 2 for x, y in zip(a[n], b[n])] for n in a if n in b}

pairs = [a.split(':') for a in sys.argv[1:]]
base = both(*pairs[0])
for p1, p2 in pairs[1:]:
    t = both(p1, p2)
    names = sorted(set(base) & set(t))
    for g in ('conv', 'gemm', 'drop', 'sub'):
        ns = [n for n in names if tab.group(n) == g]
        if not ns:
            continue
        mean = lambda d, i: sum(d[n][i] for n in ns) / len(ns)
        row = []
        for i in range(len(tab.B)):
            d = [t[n][i] - base[n][i] for n in ns]
            m = sum(d) / len(d)
            se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d)) if len(d) > 1 else None
            row.append(f'{m:+.3f}' + (f' ± {se:.3f}' if se is not None else ''))
        print(f'| {g} ({len(ns)}) | default | ' + ' | '.join(f'{mean(base, i):.3f}' for i in range(len(tab.B))) + ' |')
        print(f'| | {os.path.basename(p1)} | ' + ' | '.join(f'{mean(t, i):.3f}' for i in range(len(tab.B))) + ' |')
        print('| | difference | ' + ' | '.join(row) + ' |')
