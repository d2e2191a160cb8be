# Reads run.sh's timing lines (stdin) and prints, for each fa8 build, its time beside our tuned fp16 best and
# PyTorch's fp16 cuDNN and flash backends on the same shape, all from the same run: the ratios #13 asks for.
import re
import sys

fa8, f16, torch = {}, {}, {}
for line in sys.stdin:
    m = re.match(r"(\S+): time (\S+)( causal)? scale.*\| ([0-9.]+) us", line)
    if m:
        fa8[m.group(1)] = (m.group(2) + (m.group(3) or ""), float(m.group(4)))
        continue
    m = re.match(r"(f16\S+): (\S+?)( causal)?: .*\| ([0-9.]+) us", line)
    if m:
        f16[m.group(2) + (m.group(3) or "")] = (m.group(1), float(m.group(4)))
        continue
    m = re.match(r"torch-(\w+) (\S+?)( causal)?: ([0-9.]+) us", line)
    if m:
        torch[(m.group(1), m.group(2) + (m.group(3) or ""))] = float(m.group(4))
print("| build | shape | fa8 µs | our fp16 best µs | fp16 ÷ fa8 | cuDNN fp16 µs | cuDNN ÷ fa8 | flash fp16 µs | flash ÷ fa8 |")
print("|---|---|---|---|---|---|---|---|---|")
for name, (shape, us) in fa8.items():
    row = [name, shape, f"{us:.1f}"]
    if shape in f16:
        row += [f"{f16[shape][1]:.1f}", f"{f16[shape][1] / us:.2f}x"]
    else:
        row += ["-", "-"]
    for be in ("cudnn", "flash"):
        t = torch.get((be, shape))
        row += [f"{t:.1f}", f"{t / us:.2f}x"] if t else ["-", "-"]
    print("| " + " | ".join(row) + " |")
