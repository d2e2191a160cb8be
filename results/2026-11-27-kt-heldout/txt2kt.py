#!/usr/bin/env python3
# Writes a Kernel Tuner cache file (gzip JSON) from the compact copy of one:
#   txt2kt.py IN.txt OUT.json.gz
# IN.txt: three header lines (# source ..., # tune_params_keys JSON, # tune_params JSON), then one line
# "KEY TIME" per cache entry (TIME in milliseconds, truncated to three decimals). Checks every key
# against the tune parameters (arity, listed values, no duplicates) and exits non-zero on any fault.
import gzip, json, os, sys

src, dst = sys.argv[1], sys.argv[2]
head, keys, params, cache = None, None, None, {}
for n, line in enumerate(open(src), 1):
    line = line.rstrip('\n')
    if not line.strip():
        continue
    if line.startswith('# source '):
        head = line[len('# source '):]
    elif line.startswith('# tune_params_keys '):
        keys = json.loads(line[len('# tune_params_keys '):])
    elif line.startswith('# tune_params '):
        params = json.loads(line[len('# tune_params '):])
    elif line.startswith('#'):
        continue
    else:
        k, t = line.split()
        vals = k.split(',')
        if len(vals) != len(keys):
            sys.exit(f'{src}:{n}: key {k} has {len(vals)} values, want {len(keys)}')
        for name, v in zip(keys, vals):
            if v not in [str(x) for x in params[name]]:
                sys.exit(f'{src}:{n}: {name}={v} is not among {params[name]}')
        if k in cache:
            sys.exit(f'{src}:{n}: key {k} twice')
        try:
            time = float(t)
        except ValueError:
            time = t.strip('"')
        cache[k] = {'time': time}
if head is None or keys is None or params is None:
    sys.exit(f'{src}: header lines missing')
product = 1
for name in keys:
    product *= len(params[name])
# OUT is named KIND_GPU.json.gz (GEMM_V100.json.gz, pnpoly_K20.json.gz, ...)
kind, _, gpu = os.path.basename(dst).replace('.json.gz', '').partition('_')
out = {'device_name': gpu,
       'kernel_name': kind, 'tune_params_keys': keys, 'tune_params': params,
       'note': 'copied from ' + head + '; times truncated to three decimals',
       'cache': cache}
with open(dst, 'wb') as raw, gzip.GzipFile(fileobj=raw, mode='wb', mtime=0) as f:
    f.write(json.dumps(out).encode())
valid = [v['time'] for v in cache.values() if isinstance(v['time'], float)]
print(f'{dst}: {len(cache)} entries, {len(valid)} timed, product {product}, best {min(valid)}')
