#!/usr/bin/env python3
"""Build the exported kernel as a PyTorch extension, check it and time it.

  python3 examples/torch/check.py --bundle examples/third_party/attention [--out table.md]

It builds attention_ext.cpp and the bundle's attention_launch.cu with
torch.utils.cpp_extension.load, then for every shape:
  - checks it against PyTorch's SDPA in fp32 (the math backend) on the same
    inputs, with a softmax scale that is not 1/sqrt(D) (--scale, default
    0.7/sqrt(D)); inputs are U(-1, 1), as evotune's correctness gate draws
    them, and the bound on the max abs error is that gate's;
  - times it beside PyTorch's flash and cuDNN backends in the same run, the
    way evotune bench times (bench/torch_sdpa.py: CUDA-graph replay, inputs
    rotated over more than twice the L2).
It prints a markdown table (and writes it to --out) and exits 1 when a check
fails. Shapes default to the ones the bundle was tuned for (--tuned) and
odd ones nobody tuned.
"""

import argparse
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.cpp_extension import load

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import torch_sdpa  # noqa: E402  (the timing evotune bench uses)

# evotune's correctness gate at input scale 1 (kernels.ToleranceFor).
MAX_ABS = {"fp16": 2e-3, "bf16": 1.6e-2, "fp8": 0.065, "int8": 2e-3}
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "int8": torch.int8}
UNTUNED = [(3, 5, 77), (1, 1, 1), (2, 3, 1000), (5, 7, 77), (1, 3, 1000)]


def header_macro(bundle, name):
    with open(os.path.join(bundle, "attention_launch.h")) as f:
        m = re.search(r"#define ATTENTION_%s (\S+)" % name, f.read())
    if not m:
        raise SystemExit(f"{bundle}/attention_launch.h defines no ATTENTION_{name}: is it an evotune export named attention?")
    return m.group(1).strip('"')


def build(bundle, verbose):
    # A bundle whose configs run Hopper's wgmma builds for sm_90a only (older
    # exports do not define ATTENTION_SM90A).
    with open(os.path.join(bundle, "attention_launch.h")) as f:
        sm90a = re.search(r"#define ATTENTION_SM90A 1\b", f.read())
    if sm90a:
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    return load(name="attention_ext", sources=[os.path.join(HERE, "attention_ext.cpp"), os.path.join(bundle, "attention_launch.cu")],
                extra_include_paths=[os.path.abspath(bundle)], extra_cflags=["-O3", "-std=c++17"],
                extra_cuda_cflags=["-O3", "-std=c++17"], verbose=verbose)


def quantize_int8(x, dim):
    """x in int8 with one scale per slice along dim (amax / 127, 1 for an all-zero slice), and the scales."""
    amax = x.abs().amax(dim=dim, keepdim=True)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    return torch.round(x / scale).clamp_(-127, 127).to(torch.int8), scale


def inputs(shape, dtype, gen, v_transposed=False):
    """U(-1, 1) inputs in the bundle's dtype, their fp32 values and the scales: fp8's three floats, or int8's
    per-row Q and K and per-column V scale tensors (keyword arguments of ext.forward)."""
    xs = [torch.rand(shape, device="cuda", generator=gen).mul_(2).sub_(1) for _ in range(3)]
    if dtype == "int8":
        (q, qs), (k, ks), (v, vs) = quantize_int8(xs[0], -1), quantize_int8(xs[1], -1), quantize_int8(xs[2], -2)
        scales = {"q_row_scale": qs.squeeze(-1).contiguous(), "k_row_scale": ks.squeeze(-1).contiguous(),
                  "v_col_scale": vs.squeeze(-2).contiguous()}
        return [q, k, v], [q.float() * qs, k.float() * ks, v.float() * vs], scales
    if dtype != "fp8":
        ins = [x.to(TORCH_DTYPES[dtype]) for x in xs]
        return ins, [t.float() for t in ins], {}
    scales = [max(x.abs().max().item(), 1e-30) / 448.0 for x in xs]
    ins = [(x / s).to(torch.float8_e4m3fn) for x, s in zip(xs, scales)]
    vals = [t.float() * s for t, s in zip(ins, scales)]
    if v_transposed:  # V^T [b, h, d, s rounded up to 16], the padding keys zero, as the bundle takes it
        b, h, s, d = shape
        vt = torch.zeros((b, h, d, (s + 15) // 16 * 16), dtype=torch.uint8, device="cuda")
        vt[..., :s] = ins[2].view(torch.uint8).transpose(-1, -2)
        ins[2] = vt.view(torch.float8_e4m3fn)
    return ins, vals, dict(zip(("q_scale", "k_scale", "v_scale"), scales))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", required=True, help="the folder evotune export --name attention wrote")
    p.add_argument("--tuned", default="", help="comma-separated BxHxS shapes the bundle was tuned for")
    p.add_argument("--shapes", default="", help="comma-separated BxHxS shapes (default: --tuned and untuned ones)")
    p.add_argument("--scale", type=float, default=0.0, help="softmax scale (default 0.7/sqrt(D))")
    p.add_argument("--out", default="", help="also write the markdown table here")
    p.add_argument("--json-out", default="", help="also write the rows as JSON here")
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--no-time", action="store_true", help="check only")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("check.py: no CUDA device visible to PyTorch")

    dtype, d = header_macro(args.bundle, "DTYPE"), int(header_macro(args.bundle, "HEAD_DIM"))
    causal = header_macro(args.bundle, "CAUSAL") == "1"
    scale = args.scale or 0.7 / math.sqrt(d)
    parse = lambda text: [tuple(int(x) for x in s.split("x")[:3]) for s in text.split(",") if s]
    tuned = parse(args.tuned)
    shapes = parse(args.shapes) or tuned + [s for s in UNTUNED if s not in tuned]
    ext = build(args.bundle, args.verbose)
    gen = torch.Generator(device="cuda").manual_seed(0x5d9a)

    rows, failed = [], False
    for b, h, s in shapes:
        shape = (b, h, s, d)
        ins, vals, sc = inputs(shape, dtype, gen, ext.v_transposed)
        ours = ext.forward(*ins, scale, **sc).float()
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(*vals, is_causal=causal, scale=scale)
        err = (ours - ref).abs().max().item()
        ok = math.isfinite(err) and err <= MAX_ABS[dtype]
        failed |= not ok
        row = {"shape": "x".join(map(str, shape)), "tuned": (b, h, s) in tuned, "config": ext.config_key(b, h, s, d),
               "max_abs_err": err, "ok": ok}
        if not args.no_time:
            quantized = dtype in ("fp8", "int8")
            sets = torch_sdpa.input_sets(shape, torch.float16 if quantized else TORCH_DTYPES[dtype], True)
            if quantized:  # PyTorch beside fp8 and int8 in fp16, as evotune bench does; ours in the bundle's dtype
                ours_sets = [tuple(inputs(shape, dtype, gen, ext.v_transposed)[0]) for _ in sets]
            else:
                ours_sets = sets
            row["ours_us"], _ = torch_sdpa.time_graph(lambda q, k, v: ext.forward(q, k, v, scale, **sc), ours_sets, args.samples, 200.0)
            for name in ("flash", "cudnn"):
                try:
                    with sdpa_kernel([torch_sdpa.BACKENDS[name]]):
                        row[name + "_us"], _ = torch_sdpa.time_graph(
                            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale), sets, args.samples, 200.0)
                except Exception as e:  # a backend that does not take this shape
                    row[name + "_us"] = 0.0
                    row[name + "_error"] = f"{type(e).__name__}"
                    torch.cuda.synchronize()
            del sets, ours_sets
            torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "n/a"
    us = lambda v: f"{v:.2f}" if v else "n/a"
    lines = [f"softmax scale {scale:.6g}, {dtype} D={d}{' causal' if causal else ''}, inputs U(-1, 1); "
             f"max abs err against PyTorch's fp32 math SDPA, bound {MAX_ABS[dtype]:g}; µs per call by CUDA-graph replay "
             f"(bench/torch_sdpa.py's method), ours / flash and ours / cuDNN below 1 when ours is faster.", "",
             "| shape | tuned | config | max abs err | check | ours µs | flash µs | cuDNN µs | ours / flash | ours / cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {'yes' if r['tuned'] else 'no'} | `{r['config']}` | {r['max_abs_err']:.3g} | "
                     f"{'ok' if r['ok'] else 'FAIL'} | {us(r.get('ours_us'))} | {us(r.get('flash_us'))} | {us(r.get('cudnn_us'))} | "
                     f"{ratio(r.get('ours_us'), r.get('flash_us'))} | {ratio(r.get('ours_us'), r.get('cudnn_us'))} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"dtype": dtype, "head_dim": d, "causal": causal, "scale": scale, "rows": rows}, f, indent=1)
    if failed:
        print("check.py: FAILED: a shape's output is off PyTorch's beyond the bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
