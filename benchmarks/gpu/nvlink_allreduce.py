"""Hand-run on a multi-GPU machine: NVLink traffic as infertop's NvmlReader sees it, under a
real NCCL all-reduce loop (one process per GPU, torch.distributed).

NVLink multicast (NVLS) stays off: a program that uses it can put the host's shared GPUs out
of service, so NCCL_NVLS_ENABLE=0 (and the PyTorch / NVSHMEM equivalents) are forced here
before any worker starts. While the loop runs, the parent samples every GPU once a second
through `collectors.probe.nvidia_gpus.NvmlReader` and prints, per GPU: links present, links up, NVLink
TX/RX bytes/s (reset-aware rates from the cumulative counters) and error counters.

On one GPU it still runs (an all-reduce of one rank moves nothing over NVLink) and shows
the no-NVLink path: every nvlink_* figure absent (None), no errors.
Usage: python3 benchmarks/gpu/nvlink_allreduce.py [--seconds 20] [--mib 256] [--out DIR]
"""

from __future__ import annotations

import os

# before torch / NCCL are imported anywhere, and inherited by every worker
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from infertop.collectors.probe import nvidia_gpus as probe_gpus  # noqa: E402
from infertop.collectors.rates import counter_rate  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker(rank: int, world: int, port: int, seconds: float, mib: int, started: Any, result: Any) -> None:
    import torch
    import torch.distributed as dist

    assert os.environ.get("NCCL_NVLS_ENABLE") == "0"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    n = mib * (1 << 20) // 4
    x = torch.full((n,), float(rank + 1), device="cuda", dtype=torch.float32)
    dist.all_reduce(x)  # also a correctness check: every element must be 1 + 2 + … + world
    expect = world * (world + 1) / 2
    ok = bool(torch.all(x == expect).item())
    torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        started.set()
    deadline = time.monotonic() + seconds
    rounds = 0
    t0 = time.perf_counter()
    while time.monotonic() < deadline:
        for _ in range(10):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        rounds += 10
    elapsed = time.perf_counter() - t0
    # ring all-reduce moves 2·(world−1)/world of the buffer per rank per round ("bus bandwidth")
    bus_gb_s = 2 * (world - 1) / world * n * 4 * rounds / elapsed / 1e9 if world > 1 else 0.0
    result.put({"rank": rank, "correct": ok, "rounds": rounds, "bus_gb_s": bus_gb_s})
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch.multiprocessing as mp

    reader = probe_gpus.NvmlReader()
    world = reader.count
    print(f"GPUs: {world} × {reader.static[0]['name'] if world else '-'}; NCCL_NVLS_ENABLE="
          f"{os.environ['NCCL_NVLS_ENABLE']}", flush=True)
    baseline = reader.read()
    ctx = mp.get_context("spawn")
    started = ctx.Event()
    result = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, args.seconds, args.mib, started, result))
             for r in range(world)]
    for p in procs:
        p.start()
    if not started.wait(timeout=180):
        print("workers did not start", flush=True)
        for p in procs:
            p.kill()
        return 1
    series: list[tuple[float, list[dict[str, Any]]]] = []
    end = time.monotonic() + args.seconds - 1.0
    while time.monotonic() < end:
        series.append((time.monotonic(), reader.read()))
        time.sleep(1.0)
    for p in procs:
        p.join(timeout=120)
    ranks = sorted((result.get(timeout=5) for _ in procs), key=lambda r: r["rank"])
    rows = []
    print("gpu links_total links_up tx_GB/s rx_GB/s errors_total | baseline links_up")
    for i in range(world):
        def rate(key: str, i: int = i) -> float | None:
            return counter_rate([(t, g[i].get(key)) for t, g in series])

        last = series[-1][1][i] if series else {}
        row = {
            "gpu": i,
            "nvlink_links_total": last.get("nvlink_links_total"),
            "nvlink_links_up": last.get("nvlink_links_up"),
            "nvlink_tx_bytes_per_s": rate("nvlink_tx_bytes_total"),
            "nvlink_rx_bytes_per_s": rate("nvlink_rx_bytes_total"),
            "nvlink_errors_total": last.get("nvlink_errors_total"),
            "baseline_links_up": baseline[i].get("nvlink_links_up"),
        }
        rows.append(row)

        def gb(v: float | None) -> str:
            return "None" if v is None else f"{v / 1e9:.1f}"

        print(f"{i:3} {row['nvlink_links_total']!s:>11} {row['nvlink_links_up']!s:>8} "
              f"{gb(row['nvlink_tx_bytes_per_s']):>7} {gb(row['nvlink_rx_bytes_per_s']):>7} "
              f"{row['nvlink_errors_total']!s:>12} | {row['baseline_links_up']!s}")
    print("workers:", ranks)
    print(f"NvmlReader cached links per GPU: {[len(x or []) for x in reader.nvlinks]}; "
          f"fields: {reader.nvlink_fields}")
    if args.out:
        Path(args.out, "nvlink.json").write_text(json.dumps(
            {"rows": rows, "workers": ranks, "samples": len(series), "world": world}, indent=1))
    reader.close()
    return 0 if all(r["correct"] for r in ranks) else 1


if __name__ == "__main__":
    sys.exit(main())
