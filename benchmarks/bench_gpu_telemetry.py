"""Per-sample cost of GPU telemetry: infertop's reader against its peers, as ratios.

With an NVIDIA GPU here, it measures live (benchmarks/gpu/measure.py's side-by-side step:
infertop's NvmlReader and probe tick, direct NVML, nvitop, gpustat, an nvidia-smi
subprocess). Without one (this project's 2-core machine), it reports the newest run
recorded on a real GPU in benchmarks/gpu/results/*.json, naming the GPU, driver and file,
so the table always says where a GPU figure came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.common import Row

RESULTS = Path(__file__).resolve().parent / "gpu" / "results"
COMMAND_LIVE = "python3 benchmarks/gpu/measure.py --out DIR"
# what "near the NVML floor" means for one GPU read per tick (issue 4: tens of µs per GPU)
READER_TARGET_US = 100.0
READER_KEY = "infertop NvmlReader.read (probe & local)"
DIRECT_KEY = "direct NVML, same six figures"


def _live() -> dict[str, Any] | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    from benchmarks.gpu import measure

    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    if not handles:
        return None
    measure.info(handles)
    measure.side_by_side(handles)
    return dict(measure.RESULT)


def _recorded() -> tuple[dict[str, Any], Path] | None:
    # the newest side-by-side run: other records (e.g. an NVLink all-reduce) sit beside it
    for path in sorted(RESULTS.glob("*.json"), reverse=True):
        result = json.loads(path.read_text())
        if result.get("side_by_side"):
            return result, path
    return None


def rows_from(result: dict[str, Any], source: str) -> list[Row]:
    machine = result.get("machine", {})
    gpus = machine.get("gpus") or ["?"]
    where = f"{len(gpus)}× {gpus[0]}, driver {machine.get('driver', '?')}; {source}"
    side = result.get("side_by_side", {})
    rows = []
    for name, r in side.items():
        value = f"{r['median_us']:.1f} µs median, {r['p99_us']:.0f} µs p99, {r['ratio_to_direct_nvml']:.1f}× direct NVML"
        target, verdict = "—", "info"
        if name == READER_KEY:
            per_gpu = r["median_us"] / len(gpus)
            target = f"< {READER_TARGET_US:.0f} µs per GPU"
            verdict = "met" if per_gpu < READER_TARGET_US else f"missed by {per_gpu - READER_TARGET_US:.0f} µs"
        rows.append(Row(f"GPU read per sample: {name} ({where})", value, target, verdict, COMMAND_LIVE))
    return rows


def run() -> list[Row]:
    live = _live()
    if live is not None:
        return rows_from(live, "measured live by this run")
    recorded = _recorded()
    if recorded is None:
        return [Row("GPU read per sample", "no GPU here and no recorded run", "—", "info", COMMAND_LIVE)]
    result, path = recorded
    return rows_from(result, f"recorded: {path.relative_to(RESULTS.parent.parent.parent)}")
