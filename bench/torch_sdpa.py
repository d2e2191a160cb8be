#!/usr/bin/env python3
"""PyTorch SDPA timings per backend, measured the way evotune's worker measures.

For each shape and backend (flash, cuDNN, efficient) it reports microseconds
per call twice:
  graph: a CUDA graph of N calls is captured once and replayed; each sample is
         one replay between CUDA events, divided by N (N grows until a replay
         lasts --min-sample-us). Launch overhead is mostly gone, as for the
         worker's timings.
  eager: --eager-calls plain calls between CUDA events, divided by the count.
Inputs are rotated over enough sets (Q, K, V, O) that one pass over them
exceeds twice the L2 cache, as the worker does, unless --no-rotate.

--check-ref DIR... compares dumps written by `worker --dump-ref DIR` (the
worker's seeded inputs and its fp32 reference) with PyTorch's math SDPA in
fp64 on the same inputs, and prints the max abs error of each.

Only torch is needed. --json prints one JSON object on stdout.
"""

import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_shape(text):
    parts = text.lower().split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"shape {text!r}: want BxHxSxD, e.g. 1x8x512x64")
    return tuple(int(p) for p in parts)


def input_sets(shape, dtype, rotate):
    """Enough (q, k, v) sets that one pass over them exceeds 2x the L2."""
    b, h, s, d = shape
    elem = torch.tensor([], dtype=dtype).element_size()
    set_bytes = 4 * b * h * s * d * elem
    n = 1
    if rotate:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        free, _ = torch.cuda.mem_get_info()
        cap = min(2 << 30, free // 2)
        n = max(1, min(2 * l2 // set_bytes + 1, cap // set_bytes))
    gen = torch.Generator(device="cuda").manual_seed(0x7157)
    sets = []
    for _ in range(n):
        q, k, v = (torch.rand(shape, device="cuda", dtype=torch.float32, generator=gen).mul_(2).sub_(1).to(dtype) for _ in range(3))
        sets.append((q, k, v))
    return sets


def elapsed_us(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def time_graph(call, sets, samples, min_sample_us, max_calls=4096):
    """Median µs per call over samples replays of a graph of N calls."""
    stream = torch.cuda.Stream()
    # Warm up outside the graph (cuDNN and flash pick and cache plans here).
    with torch.cuda.stream(stream):
        for i in range(3):
            call(*sets[i % len(sets)])
    torch.cuda.synchronize()
    n = 1
    while True:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(n):
                call(*sets[i % len(sets)])
        graph.replay()
        torch.cuda.synchronize()
        us = elapsed_us(graph.replay)
        if us >= min_sample_us or n >= max_calls:
            break
        grow = 2
        while grow < min_sample_us * 1.2 / max(us, 1e-3) and grow < max_calls:
            grow *= 2
        n = min(n * grow, max_calls)
    # Warm up: at least 3 replays and 20 ms.
    spent, i = 0.0, 0
    while i < 3 or spent < 20000:
        spent += elapsed_us(graph.replay)
        i += 1
    pairs = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        pairs.append((a, b))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1000.0 / n for a, b in pairs), n


def time_eager(call, sets, samples, calls):
    """Median µs per call over samples runs of calls eager calls."""
    for i in range(10):
        call(*sets[i % len(sets)])
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        def run():
            for i in range(calls):
                call(*sets[i % len(sets)])
        out.append(elapsed_us(run) / calls)
    return statistics.median(out)


def bench(args):
    dtype = DTYPES[args.dtype]
    results = []
    for shape in args.shapes:
        sets = input_sets(shape, dtype, not args.no_rotate)
        for name in args.backends:
            backend = BACKENDS[name]
            row = {"shape": "x".join(map(str, shape)), "backend": name, "dtype": args.dtype, "causal": args.causal,
                   "input_sets": len(sets), "graph_us": 0.0, "eager_us": 0.0, "launches_per_sample": 0, "error": ""}

            def call(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)

            try:
                # The backend is chosen once, outside the timed loops, so that
                # eager times hold no extra Python context switching.
                with sdpa_kernel([backend]):
                    row["graph_us"], row["launches_per_sample"] = time_graph(call, sets, args.samples, args.min_sample_us)
                    row["eager_us"] = time_eager(call, sets, args.samples, args.eager_calls)
                b, h, s, d = shape
                flops = 4.0 * b * h * s * s * d * (0.5 if args.causal else 1.0)
                row["graph_tflops"] = flops / row["graph_us"] / 1e6
            except Exception as e:  # an unsupported backend for this shape or dtype
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                torch.cuda.synchronize()
            results.append(row)
            if not args.json:
                if row["error"]:
                    print(f"{row['shape']:>16} {name:>10}: {row['error']}")
                else:
                    print(f"{row['shape']:>16} {name:>10}: graph {row['graph_us']:9.2f} µs ({row['graph_tflops']:.0f} TFLOP/s)"
                          f"  eager {row['eager_us']:9.2f} µs  ({len(sets)} input sets)")
        del sets
        torch.cuda.empty_cache()
    return results


def check_ref(dirs):
    """Max abs error of each worker reference dump against fp64 math SDPA."""
    checks = []
    for d in dirs:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        sh = meta["shape"]
        shape = (sh["b"], sh["h"], sh["s"], sh["d"])
        dtype = DTYPES[meta["dtype"]]

        def load(name, dt):
            with open(os.path.join(d, meta["files"][name]), "rb") as f:
                data = bytearray(f.read())
            t = torch.frombuffer(data, dtype=dt)
            if t.numel() != math.prod(shape):
                raise SystemExit(f"{d}/{meta['files'][name]}: {t.numel()} elements, want {math.prod(shape)}")
            return t.reshape(shape).cuda()

        q, k, v = (load(n, dtype).double() for n in ("q", "k", "v"))
        ref = load("ref", torch.float32).double()
        with sdpa_kernel([SDPBackend.MATH]):
            want = F.scaled_dot_product_attention(q, k, v, is_causal=meta["causal"], scale=meta["scale"])
        err = (ref - want).abs()
        checks.append({"dir": d, "shape": "x".join(map(str, shape)), "dtype": meta["dtype"], "causal": meta["causal"],
                       "seed": meta["seed"], "max_abs_err": err.max().item(), "mean_abs_err": err.mean().item(),
                       "ref_max_abs": want.abs().max().item()})
    return checks


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="1x8x512x64,2x8x512x64,4x16x2048x64,4x16x2048x128",
                   help="comma-separated BxHxSxD shapes")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp16")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--backends", default="flash,cudnn,efficient", help="comma-separated: flash, cudnn, efficient")
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--min-sample-us", type=float, default=200.0, help="a graph replay lasts at least this long")
    p.add_argument("--eager-calls", type=int, default=100, help="eager calls between one pair of events")
    p.add_argument("--no-rotate", action="store_true", help="one input set (L2-hot)")
    p.add_argument("--check-ref", nargs="+", metavar="DIR", help="compare worker --dump-ref outputs with fp64 math SDPA")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args()

    if not torch.cuda.is_available():
        raise SystemExit("torch_sdpa.py: no CUDA device visible to PyTorch")
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() or 0,
           "device": torch.cuda.get_device_name(0)}
    if args.check_ref:
        out["checks"] = check_ref(args.check_ref)
        if not args.json:
            for c in out["checks"]:
                print(f"{c['dir']}: max abs err {c['max_abs_err']:.3g} (reference max |o| {c['ref_max_abs']:.3g})")
    else:
        try:
            args.shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
        except argparse.ArgumentTypeError as e:
            p.error(str(e))
        args.backends = [b for b in args.backends.split(",") if b]
        for b in args.backends:
            if b not in BACKENDS:
                p.error(f"--backends: unknown backend {b!r} (want {', '.join(BACKENDS)})")
        if args.samples < 1 or args.eager_calls < 1:
            p.error("--samples and --eager-calls must be positive")
        out.update({"dtype": args.dtype, "causal": args.causal, "rotate": not args.no_rotate, "results": bench(args)})
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
