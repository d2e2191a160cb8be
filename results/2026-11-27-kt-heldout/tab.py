#!/usr/bin/env python3
# Tables of results/2026-11-27-kt-heldout:
#   python3 tab.py [--spaces DIR] [--published FILE] OUT/LABEL1 OUT/LABEL2
#   python3 tab.py --versus OUT/BASE1 OUT/BASE2 OUT/TRY1 OUT/TRY2
# Each argument is a folder of `bench-search --format json` outputs, one per space (seeds 1..50 and
# 51..100); a space's figure is the mean of the two. Prints, as markdown: every space's evo and exact
# random mean fraction of the optimum per budget, then the means over the study's held-out spaces
# and over every space, beside the targets of #15 (the study's best published 17-space means).
# With --spaces DIR, first a table of the spaces of DIR (their sizes and optima). With --published FILE
# (spaces -> strategy -> budget -> mean fraction, the study's figures for the strategies whose files
# are stored), last a table of evo against the best of those strategies on each space. With --versus,
# only a table of a try (TRY1, TRY2) beside the defaults (BASE1, BASE2) over the same spaces: the
# study's spaces and each kind, means and the difference's standard error over spaces.
import gzip, json, os, sys

B = [25, 50, 100, 200, 400, 800, 1600]
TARGET = [0.813, 0.896, 0.938, 0.967, 0.986, 0.994, 0.999]
# The study's 17 spaces (its experimental_data/deterministic): GEMM and convolution on A100, GTX Titan X,
# TITAN RTX, V100, K20 and MI50; pnpoly on A100, GTX Titan X, TITAN RTX, V100 and K20.
STUDY = {f'{k}_{g}' for k in ('GEMM', 'convolution') for g in ('A100', 'GTX_Titan_X', 'TITAN_RTX', 'V100', 'K20', 'MI50')}
STUDY |= {f'pnpoly_{g}' for g in ('A100', 'GTX_Titan_X', 'TITAN_RTX', 'V100', 'K20')}
SHARED = {'GEMM_A100', 'convolution_A100'}
WEIGHT = {'GEMM': 6, 'convolution': 6, 'pnpoly': 5}  # the study's spaces of each kind


def load(d):
    r = {}
    for f in sorted(os.listdir(d)):
        x = json.load(gzip.open(os.path.join(d, f), 'rt') if f.endswith('.gz') else open(os.path.join(d, f)))
        c = x['comparison']
        r[f.split('.json')[0]] = ([b['mean_fraction'] for b in c['strategies'][0]['budgets']], c['random_fraction'])
    return r


def spaces(d):
    """The spaces' sizes: product, timed configs, optimum, configs within 2% of it."""
    print('| space | in the study | product | timed | optimum ms | within 2% |')
    print('|---|---|---|---|---|---|')
    for f in sorted(os.listdir(d), key=lambda f: (f.split('_')[0], f)):
        if not f.endswith('.json.gz'):
            continue
        x = json.load(gzip.open(os.path.join(d, f), 'rt'))
        product = 1
        for k in x['tune_params_keys']:
            product *= len(x['tune_params'][k])
        ts = [v['time'] for v in x['cache'].values() if isinstance(v['time'], float)]
        n, best = f[:-len('.json.gz')], min(ts)
        print(f'| {n} | {"yes" if n in STUDY else "no"} | {product} | {len(ts)} | {best:.3f} | {sum(t <= 1.02 * best for t in ts)} |')
    print()


def versus(b1, b2, t1, t2):
    """A try beside the defaults, per group of spaces (the --ils table of the README)."""
    mean2 = lambda a, b: {n: [(p + q) / 2 for p, q in zip(a[n][0], b[n][0])] for n in a}
    base, tried = mean2(load(b1), load(b2)), mean2(load(t1), load(t2))
    study = sorted(n for n in base if n in STUDY)
    groups = [(f'the {len(study)} study spaces', study)]
    for k in ('GEMM', 'convolution', 'pnpoly'):
        ns = sorted(n for n in base if n.startswith(k))
        groups.append((f'{k} ({len(ns)})', ns))
    print('| spaces | | ' + ' | '.join(map(str, B)) + ' |')
    print('|---|---|' + '---|' * len(B))
    for title, ns in groups:
        m = lambda d: [sum(d[n][i] for n in ns) / len(ns) for i in range(len(B))]
        print(f'| {title} | defaults | {row(m(base))} |')
        print(f'| | --ils | {row(m(tried))} |')
        cells = []
        for i in range(len(B)):
            d = [tried[n][i] - base[n][i] for n in ns]
            mu = sum(d) / len(d)
            se = (sum((x - mu) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
            cells.append(f'{mu:+.3f} ± {se:.3f}')
        print('| | difference | ' + ' | '.join(cells) + ' |')


row = lambda xs: ' | '.join(f'{x:.3f}' for x in xs)
if sys.argv[1] == '--versus':
    versus(*sys.argv[2:6])
    sys.exit()
pub = None
while sys.argv[1].startswith('--'):
    if sys.argv[1] == '--spaces':
        spaces(sys.argv[2])
    elif sys.argv[1] == '--published':
        pub = json.load(open(sys.argv[2]))['spaces']
    sys.argv[1:] = sys.argv[3:]
runs = [load(d) for d in sys.argv[1:]]
names = sorted(set.intersection(*[set(r) for r in runs]), key=lambda n: (n.split('_')[0], n))
evo = {n: [sum(r[n][0][i] for r in runs) / len(runs) for i in range(len(B))] for n in names}
rnd = {n: runs[0][n][1] for n in names}
kind = lambda n: n.split('_')[0]
row = lambda xs: ' | '.join(f'{x:.3f}' for x in xs)
row4 = lambda xs: ' | '.join(f'{x:.4f}' for x in xs)
mean = lambda ns, d: [sum(d[n][i] for n in ns) / len(ns) for i in range(len(B))]

print('| space | in the study | | ' + ' | '.join(map(str, B)) + ' |')
print('|---|---|---|' + '---|' * len(B))
for n in names:
    print(f'| {n} | {"yes" if n in STUDY else "no"} | evo | {row(evo[n])} |')
    print(f'| | | random (exact) | {row(rnd[n])} |')


def summary(title, ns, target=True):
    if not ns:
        return
    e, r = mean(ns, evo), mean(ns, rnd)
    print(f'| {title} ({len(ns)}) | evo | {row4(e)} |')
    print(f'| | random (exact) | {row(r)} |')
    kinds = sorted({kind(n) for n in ns})
    if len(kinds) > 1:
        w = [WEIGHT[k] for k in kinds]
        ke = [mean([n for n in ns if kind(n) == k], evo) for k in kinds]
        kw = [sum(wk * m[i] for wk, m in zip(w, ke)) / sum(w) for i in range(len(B))]
        print(f'| | evo, kinds weighted as the study\'s 17 ({"/".join(f"{k} {x}" for k, x in zip(kinds, w))}) | {row4(kw)} |')
        print('| | target met (weighted) | ' + ' | '.join('PASS' if x >= t else 'FAIL' for x, t in zip(kw, TARGET)) + ' |')
    if target:
        print('| | target met (plain mean) | ' + ' | '.join('PASS' if x >= t else 'FAIL' for x, t in zip(e, TARGET)) + ' |')


print()
print('| group | | ' + ' | '.join(map(str, B)) + ' |')
print('|---|---|' + '---|' * len(B))
print(f'| target: best published 17-space mean | | {row(TARGET)} |')
held = [n for n in names if n in STUDY and n not in SHARED]
summary("the study's spaces outside shared/", held)
for k in ('GEMM', 'convolution', 'pnpoly'):
    summary(f"  {k} of them", [n for n in held if kind(n) == k], target=False)
summary('every space here', [n for n in names if n not in SHARED])


def against_published():
    """evo against the best published strategy of each space, among those whose figures are stored."""
    ns = [n for n in names if n in pub and n not in SHARED]
    print()
    print('| space | stored strategies | | ' + ' | '.join(map(str, B)) + ' |')
    print('|---|---|---|' + '---|' * len(B))
    wins, total, diffs = 0, 0, [[] for _ in B]
    for n in ns:
        st = pub[n]
        best, who = [], []
        for b in B:
            c = [(v[str(b)], k) for k, v in st.items() if str(b) in v]
            m = max(c)
            best.append(m[0])
            who.append(m[1])
        d = [e - x for e, x in zip(evo[n], best)]
        for i, x in enumerate(d):
            diffs[i].append(x)
            total += 1
            wins += x >= 0
        print(f'| {n} | {len(st)} | best published | {row(best)} |')
        print(f'| | | evo − best | ' + ' | '.join(f'{x:+.3f}' for x in d) + ' |')
        print(f'| | | (best: {"; ".join(dict.fromkeys(who))}) |' + ' |' * len(B))
    print(f'| mean over {len(ns)} spaces | | evo − best | ' + ' | '.join(f'{sum(x) / len(x):+.4f}' for x in diffs) + ' |')
    print()
    print(f'evo at or above the best stored published strategy of its space: {wins} of {total} (space, budget) pairs.')
    print()
    print('Strategy by strategy, over the spaces whose figures for it are stored (five or more):')
    print()
    print('| strategy | spaces | | ' + ' | '.join(map(str, B)) + ' |')
    print('|---|---|---|' + '---|' * len(B))
    strategies = sorted({k for n in ns for k in pub[n]})
    for k in strategies:
        on = [n for n in ns if k in pub[n] and all(str(b) in pub[n][k] for b in B)]
        if len(on) < 5:
            continue
        m = [sum(pub[n][k][str(b)] for n in on) / len(on) for b in B]
        e = mean(on, evo)
        print(f'| {k} | {len(on)} | its mean | {row(m)} |')
        print(f'| | | evo − it | ' + ' | '.join(f'{x - y:+.3f}' for x, y in zip(e, m)) + ' |')


if pub:
    against_published()
