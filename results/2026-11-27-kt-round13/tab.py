#!/usr/bin/env python3
"""Tables of round 13 (evo/NOTES.md) from the committed runs.

usage: python3 results/2026-11-27-kt-round13/tab.py [LABEL ...]   (default: XB1 XB2 XB1T5 XB1T8 XB1T64 B8T8)

The reference B is evo at its defaults, seeds 1..100: the 20 held-out spaces from
results/2026-11-27-kt-heldout/out/evo1 and evo51 (seeds 1..50 and 51..100, averaged),
the two A100 files from out/B. Every other label is one run of seeds 1..100.
"""
import glob, gzip, json, os, statistics as st, sys

HERE = os.path.dirname(os.path.abspath(__file__))
HELD = os.path.join(HERE, '..', '2026-11-27-kt-heldout', 'out')
DEV = {'GEMM_A100', 'convolution_A100', 'convolution_GTX_Titan_X', 'convolution_RTX_2070_SUPER',
       'convolution_TITAN_RTX', 'convolution_V100', 'pnpoly_GTX_Titan_X', 'pnpoly_RTX_2070_SUPER',
       'pnpoly_TITAN_RTX', 'pnpoly_V100'}
STUDY = ['GEMM_GTX_Titan_X', 'GEMM_K20', 'GEMM_TITAN_RTX', 'GEMM_V100', 'convolution_GTX_Titan_X',
         'convolution_TITAN_RTX', 'convolution_V100', 'convolution_K20', 'convolution_MI50', 'pnpoly_A100',
         'pnpoly_GTX_Titan_X', 'pnpoly_TITAN_RTX', 'pnpoly_V100', 'pnpoly_K20']
TARGET = [0.813, 0.896, 0.938, 0.967, 0.986, 0.994, 0.999]


def fractions(path):
    d = json.load(gzip.open(path))
    return [b['mean_fraction'] for b in d['comparison']['strategies'][0]['budgets']]


def load(label):
    out = {}
    for f in glob.glob(os.path.join(HERE, 'out', label, '*.json.gz')):
        out[os.path.basename(f)[:-len('.json.gz')]] = fractions(f)
    return out


def base():
    out = load('B')
    for f in glob.glob(os.path.join(HELD, 'evo1', '*.json.gz')):
        b = os.path.basename(f)
        a, c = fractions(f), fractions(os.path.join(HELD, 'evo51', b))
        out[b[:-len('.json.gz')]] = [(x + y) / 2 for x, y in zip(a, c)]
    return out


def row(vals, fmt):
    return ' | '.join(fmt % v for v in vals)


def main():
    labels = sys.argv[1:] or ['XB1', 'XB2', 'XB1T5', 'XB1T8', 'XB1T64', 'B8T8']
    B = base()
    runs = {l: load(l) for l in labels}
    groups = {}
    for s in sorted(B):
        kind = s.split('_')[0]
        groups.setdefault(('development' if s in DEV else 'held out') + ' ' + kind, []).append(s)
    groups['all development'] = [s for s in B if s in DEV]
    groups['all held out'] = [s for s in B if s not in DEV]
    print('## Differences from the defaults by group (mean over the group\'s spaces of label − B)\n')
    print('| group | | 25 | 50 | 100 | 200 | 400 | 800 | 1600 |')
    print('|---|---|---|---|---|---|---|---|---|')
    for g in sorted(groups):
        ss = groups[g]
        print('| %s (%d) | B | %s |' % (g, len(ss), row([st.mean(B[s][i] for s in ss) for i in range(7)], '%.4f')))
        for l in labels:
            ok = [s for s in ss if s in runs[l]]
            if ok:
                d = [st.mean(runs[l][s][i] - B[s][i] for s in ok) for i in range(7)]
                print('| | %s%s | %s |' % (l, '' if len(ok) == len(ss) else ' (%d)' % len(ok), row(d, '%+.4f')))
    print('\n## The 14 study spaces outside shared/, beside #15\'s target\n')
    print('| | 25 | 50 | 100 | 200 | 400 | 800 | 1600 |')
    print('|---|---|---|---|---|---|---|---|')
    print('| target | %s |' % row(TARGET, '%.3f'))
    for l, r in [('B', B)] + [(l, runs[l]) for l in labels]:
        if not all(s in r for s in STUDY):
            continue
        m = [st.mean(r[s][i] for s in STUDY) for i in range(7)]
        k = {p: [st.mean(r[s][i] for s in STUDY if s.startswith(p)) for i in range(7)] for p in ('GEMM', 'conv', 'pnpoly')}
        w = [(6 * k['GEMM'][i] + 6 * k['conv'][i] + 5 * k['pnpoly'][i]) / 17 for i in range(7)]
        for name, v in (('', m), (', kinds weighted 6/6/5', w)):
            print('| %s%s | %s |' % (l, name, ' | '.join('%.4f %s' % (x, 'PASS' if x >= t else 'FAIL') for x, t in zip(v, TARGET))))


if __name__ == '__main__':
    main()
