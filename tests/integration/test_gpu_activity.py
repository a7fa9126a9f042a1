"""Real compute activity (NVML GPM) through the probe's reader on a real GPU (issue 35).

Skips cleanly without a GPU (CI), without torch, or where the driver refuses GPM (the
skip says exactly what it answered). Uses the bundled probe — the text the SSH source
sends — so it needs neither pydantic nor textual on the GPU machine:

    python3 -m pytest -q -m gpu tests/integration/test_gpu_activity.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from infertop.collectors.probe.bundle import probe_script

pytestmark = pytest.mark.gpu

LOAD = r"""
import sys, time, torch
kind, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
warm = False
def ready():
    # the context is up and the first batch ran: the readings from here on see the load
    global warm
    if not warm:
        warm = True
        print("warm", flush=True)
if kind == "matmul":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while time.monotonic() < end:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
        ready()
else:
    while time.monotonic() < end:
        for _ in range(10):
            torch.cuda._sleep(20_000_000)
        torch.cuda.synchronize()
        ready()
"""


def _reader() -> Any:
    namespace: dict[str, Any] = {"__name__": "infertop_probe"}
    exec(compile(probe_script(), "infertop-probe", "exec"), namespace)
    try:
        return namespace["NvmlReader"]()
    except Exception as exc:  # ImportError (no pynvml), NVMLError (no driver)
        pytest.skip(f"no NVIDIA GPU / driver here ({type(exc).__name__})")


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.fixture(scope="module")
def reader() -> Any:
    r = _reader()
    if r.count == 0:
        pytest.skip("NVML sees no GPU")
    refused = r.gpm_refused().get(0)
    if refused is not None:
        r.close()
        pytest.skip(f"GPM refused on GPU 0: {refused}")
    if not _torch_cuda():
        r.close()
        pytest.skip("torch with CUDA is needed to load the GPU")
    yield r
    r.close()


def _under(reader: Any, kind: str) -> list[dict[str, Any]]:
    child = subprocess.Popen([sys.executable, "-c", LOAD, kind, "20"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "warm", "the load never ran"
        reader.read()
        rows = []
        for _ in range(5):
            time.sleep(1.0)  # measured: GPM figures are averages over the interval between two samples
            rows.append(reader.read()[0])
        return rows
    finally:
        child.wait(timeout=60)


def _median(rows: list[dict[str, Any]], key: str) -> float:
    values = sorted(r[key] for r in rows if r.get(key) is not None)
    assert values, f"no {key} in {rows}"
    return values[len(values) // 2]


def test_matmul_is_real_tensor_work(reader: Any) -> None:
    rows = _under(reader, "matmul")
    assert all(r.get("activity_source") == "gpm" for r in rows)
    assert _median(rows, "util_pct") >= 90
    assert _median(rows, "sm_active_pct") >= 70
    assert _median(rows, "tensor_active_pct") >= 30
    # the load's own process holds the GPU, with its memory
    pids = {p["pid"] for r in rows for p in r.get("processes") or []}
    assert pids, "NVML listed no process while torch held the GPU"


def test_a_spinning_kernel_is_busy_but_not_working(reader: Any) -> None:
    rows = _under(reader, "sleep")
    # utilisation says busy; GPM says one SM or so spins and no tensor pipe runs
    assert _median(rows, "util_pct") >= 90
    assert _median(rows, "sm_active_pct") <= 10
    assert _median(rows, "tensor_active_pct") <= 1
