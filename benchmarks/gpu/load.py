"""A real GPU load for the device measurements: a bf16 matrix-product loop in torch.

Runs for `seconds` on every visible GPU (one CUDA stream each, all driven from this one
process), prints "ready" once the first products have run, and exits by itself so a
killed parent never leaves the card busy. Usage: python3 benchmarks/gpu/load.py SECONDS [N]
"""

from __future__ import annotations

import sys
import time

import torch


def main(argv: list[str]) -> int:
    seconds = float(argv[1]) if len(argv) > 1 else 30.0
    n = int(argv[2]) if len(argv) > 2 else 8192
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    # random operands, never zeros: zeros run faster than real data
    pairs = [
        (torch.randn(n, n, device=d, dtype=torch.bfloat16), torch.randn(n, n, device=d, dtype=torch.bfloat16))
        for d in devices
    ]
    for a, b in pairs:
        (a @ b).sum().item()
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    products = 0
    while time.monotonic() < deadline:
        for a, b in pairs:
            for _ in range(8):
                torch.matmul(a, b)
        for d in devices:
            torch.cuda.synchronize(d)
        products += 8 * len(pairs)
    elapsed = seconds
    tflops = 2 * n**3 * products / elapsed / 1e12
    print(f"done products={products} approx_tflops_total={tflops:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
