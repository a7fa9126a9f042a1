"""Real compute activity through infertop's own NVML reader, under known loads (issue 35).

Reads GPU 0 with the probe's `NvmlReader` (built from the same bundle the SSH source sends,
so the probe path is what is measured) while a child process runs, in turn:
  idle      nothing
  matmul    bf16 8192³ matrix products back to back (tensor pipes busy)
  sleep     `torch.cuda._sleep` kernels back to back (one resident kernel spinning:
            utilisation ~100 %, almost no SM work) — the "busy but waiting" shape
  copy      device-to-device copies of 2 GiB (DRAM busy, no tensor work)
Beside each reading: what `nvidia-smi --query-gpu` says, and `nvidia-smi dmon --gpm-metrics`
where the driver's nvidia-smi has it. Prints one JSON document (and writes it to argv[1]).

Needs a GPU, PyTorch and nvidia-ml-py; run: python3 benchmarks/gpu/activity.py out.json
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from infertop.collectors.probe.bundle import probe_script

LOAD = r"""
import sys, time, torch
kind, seconds = sys.argv[1], float(sys.argv[2])
dev = torch.device("cuda:0")
end = time.monotonic() + seconds
if kind == "matmul":
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    while time.monotonic() < end:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
elif kind == "sleep":
    while time.monotonic() < end:
        for _ in range(10):
            torch.cuda._sleep(20_000_000)  # ~10 ms at ~2 GHz, one block spinning
        torch.cuda.synchronize()
elif kind == "copy":
    a = torch.empty(2 << 30, device=dev, dtype=torch.uint8)
    b = torch.empty_like(a)
    while time.monotonic() < end:
        for _ in range(10):
            b.copy_(a)
        torch.cuda.synchronize()
"""

SMI = ("nvidia-smi", "--query-gpu=utilization.gpu,clocks.sm,power.draw,memory.used",
       "--format=csv,noheader,nounits", "-i", "0")


def smi_now() -> dict[str, float | str]:
    try:
        out = subprocess.run(SMI, capture_output=True, text=True, timeout=10).stdout.strip()
        util, clock, power, mem = (p.strip() for p in out.split(","))
        return {"util_pct": float(util), "sm_clock_mhz": float(clock), "power_w": float(power),
                "mem_used_mib": float(mem)}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}


def smi_gpm(seconds: int) -> str:
    # nvidia-smi dmon's own GPM view (1 SM util, 2 SM occupancy, 5 any-tensor, 10 DRAM bw)
    try:
        r = subprocess.run(["nvidia-smi", "dmon", "-i", "0", "--gpm-metrics", "2,3,5,10", "-c", str(seconds)],
                           capture_output=True, text=True, timeout=seconds + 15)
        return (r.stdout + r.stderr)[-2000:]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def main() -> None:
    ns: dict = {"__name__": "infertop_probe"}
    exec(compile(probe_script(), "infertop-probe", "exec"), ns)
    reader = ns["NvmlReader"]()
    result: dict = {"gpu": reader.static[0], "gpm_refused": reader.gpm_refused(), "phases": {}}
    # what GPM support the driver claims, verbatim
    try:
        support = reader.nvml.nvmlGpmQueryDeviceSupport(reader.handles[0])
        result["gpm_query_device_support"] = int(support.isSupportedDevice)
    except Exception as exc:
        result["gpm_query_device_support"] = f"{type(exc).__name__}: {exc}"
    reader.read()  # the first GPM sample: nothing to measure against yet
    for kind, seconds in (("idle", 8), ("matmul", 25), ("sleep", 25), ("copy", 20)):
        child = None
        if kind != "idle":
            child = subprocess.Popen([sys.executable, "-c", LOAD, kind, str(seconds)])
            time.sleep(6)  # context creation, allocation, warm-up
        reader.read()
        rows = []
        for _ in range(6):
            time.sleep(1.0)
            t0 = time.perf_counter()
            gpu = reader.read()[0]
            read_us = (time.perf_counter() - t0) * 1e6
            rows.append({"reader": {k: gpu.get(k) for k in (
                "util_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct",
                "activity_source", "sm_clock_mhz", "power_w")},
                "processes": gpu.get("processes"), "read_us": round(read_us, 1), "nvidia_smi": smi_now()})
        dmon = smi_gpm(3)
        if child is not None:
            child.wait(timeout=seconds + 30)

        def med(key: str, rows: list = rows) -> float | None:
            vals = [r["reader"][key] for r in rows if r["reader"].get(key) is not None]
            return round(statistics.median(vals), 1) if vals else None

        smi_util = [r["nvidia_smi"]["util_pct"] for r in rows if "util_pct" in r["nvidia_smi"]]
        result["phases"][kind] = {
            "median": {k: med(k) for k in ("util_pct", "sm_active_pct", "sm_occupancy_pct",
                                            "tensor_active_pct", "dram_active_pct", "sm_clock_mhz", "power_w")},
            "nvidia_smi_util_median": statistics.median(smi_util) if smi_util else None,
            "read_us_median": statistics.median(r["read_us"] for r in rows),
            "rows": rows, "nvidia_smi_dmon_gpm": dmon,
        }
        print(kind, json.dumps(result["phases"][kind]["median"]), "smi util",
              result["phases"][kind]["nvidia_smi_util_median"], flush=True)
        print(dmon, flush=True)
    result["gpm_refused_after"] = reader.gpm_refused()
    reader.close()
    text = json.dumps(result, indent=1)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text)
    print(json.dumps({k: v for k, v in result.items() if k != "phases"}))


if __name__ == "__main__":
    main()
