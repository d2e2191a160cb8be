# PyTorch's fp16 SDPA (cuDNN and flash backends) on the shapes fa8.cu times,
# timed the same way: L2-warm mean of 200 launches after 20 (CUDA events).
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

shapes = [(4, 16, 2048, 64, False), (4, 16, 2048, 128, False), (8, 16, 4096, 64, True), (1, 8, 512, 64, False)]
print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} {torch.cuda.get_device_name()}")
for b, h, s, d, causal in shapes:
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(be):
                f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                for _ in range(20):
                    f()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(200):
                    f()
                e1.record()
                torch.cuda.synchronize()
                us = e0.elapsed_time(e1) * 1000 / 200
            flops = 4 * b * h * s * s * d * (0.5 if causal else 1)
            print(f"torch-{name} {b}x{h}x{s}x{d}{' causal' if causal else ''}: {us:.2f} us {flops / us * 1e-6:.0f} TFLOP/s")
        except Exception as e:  # a backend that refuses the shape
            print(f"torch-{name} {b}x{h}x{s}x{d}: unavailable ({str(e).splitlines()[0][:120]})")
