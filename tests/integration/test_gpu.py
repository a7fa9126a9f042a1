"""The local source and the probe on a real NVIDIA GPU under a real load.

Skips cleanly where there is no GPU (this project's CI machine); run on the H200 with
`python3 -m pytest -q -m gpu tests/integration/test_gpu.py` (BENCHMARKS.md has the exact command).
The load is a torch bf16 matmul loop in its own process (benchmarks/gpu/load.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from infertop.collectors.probe import nvidia_gpus as probe_gpus
from infertop.collectors.probe.bundle import probe_script
from infertop.collectors.sources.local import LocalSource

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.gpu


def _gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def _has_torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.fixture(scope="module")
def gpu_count() -> int:
    count = _gpu_count()
    if count == 0:
        pytest.skip("no NVIDIA GPU / driver here (NVML did not initialise)")
    return count


@pytest.fixture(scope="module")
def under_load(gpu_count: int, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Idle readings, then readings during ~12 s of a bf16 matmul loop on every GPU."""
    if not _has_torch_cuda():
        pytest.skip("torch with CUDA is needed to load the GPU")
    source = LocalSource("local", interval_s=0.5)
    idle = [source.read() for _ in range(3)]
    load = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "gpu" / "load.py"), "14"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert load.stdout is not None
        assert load.stdout.readline().strip() == "ready"
        time.sleep(2.0)  # measured: util is a ~1 s average in the driver; clocks settle
        busy = []
        costs = []
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            busy.append(source.read())
            costs.append(time.perf_counter() - t0)
            time.sleep(0.4)
        # the text the SSH source sends a node, run as a node runs it
        script = tmp_path_factory.mktemp("probe") / "infertop-probe.py"
        script.write_text(probe_script())
        probe_out = subprocess.run(
            [sys.executable, str(script), "1", "2"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    finally:
        load.wait(timeout=60)
    return {"idle": idle, "busy": busy, "costs": costs, "probe": probe_out}


def test_samples_are_valid(under_load: dict[str, Any], gpu_count: int) -> None:
    for reading in under_load["idle"] + under_load["busy"]:
        assert len(reading["gpus"]) == gpu_count
        assert reading["notes"] == []  # a working driver leaves no "no GPU" note
        for gpu in reading["gpus"]:
            assert gpu["healthy"] is True
            assert gpu["name"] and gpu["uuid"].startswith("GPU-")
            assert 0 <= gpu["util_pct"] <= 100
            assert 0 < gpu["mem_used_bytes"] <= gpu["mem_total_bytes"]
            assert 10 < gpu["power_w"] < 2000
            assert 0 < gpu["temp_c"] < 120
            assert 100 < gpu["sm_clock_mhz"] < 4000


def test_util_near_100_under_load(under_load: dict[str, Any]) -> None:
    for index in range(len(under_load["busy"][0]["gpus"])):
        utils = [r["gpus"][index]["util_pct"] for r in under_load["busy"]]
        assert statistics_median(utils) >= 90, utils


def test_power_and_clock_move_with_load(under_load: dict[str, Any]) -> None:
    for index in range(len(under_load["busy"][0]["gpus"])):
        idle_power = min(r["gpus"][index]["power_w"] for r in under_load["idle"])
        busy_power = max(r["gpus"][index]["power_w"] for r in under_load["busy"])
        assert busy_power > idle_power + 100, (idle_power, busy_power)
        busy_clocks = [r["gpus"][index]["sm_clock_mhz"] for r in under_load["busy"]]
        assert statistics_median(busy_clocks) > 1000, busy_clocks


def test_without_nvlink_the_fields_are_absent_not_zero(under_load: dict[str, Any]) -> None:
    for gpu in under_load["busy"][-1]["gpus"]:
        if gpu.get("nvlink_links_total") is None:
            for key in ("nvlink_links_up", "nvlink_tx_bytes_total", "nvlink_rx_bytes_total"):
                assert gpu.get(key) is None, (key, gpu)
        else:  # with NVLink the counts must agree with each other
            assert 0 <= gpu["nvlink_links_up"] <= gpu["nvlink_links_total"]


def test_probe_script_reports_the_gpus(under_load: dict[str, Any], gpu_count: int) -> None:
    lines = [json.loads(line) for line in under_load["probe"].splitlines() if line.strip()]
    assert len(lines) == 2
    for line in lines:
        assert [g["index"] for g in line["gpus"]] == list(range(gpu_count))
        for gpu in line["gpus"]:
            assert gpu["util_pct"] >= 90  # taken while the load was still running
            assert gpu["power_w"] > 100


def test_nvidia_smi_fallback_matches_nvml(gpu_count: int) -> None:
    import shutil

    smi = shutil.which("nvidia-smi")
    if smi is None:
        pytest.skip("nvidia-smi not on PATH")
    via_smi = probe_gpus.NvidiaSmiReader(smi).read()
    reader = probe_gpus.NvmlReader()
    try:
        via_nvml = reader.read()
    finally:
        reader.close()
    assert [g["index"] for g in via_smi] == list(range(gpu_count))
    for s, n in zip(via_smi, via_nvml, strict=True):
        assert s["uuid"] == n["uuid"]
        assert s["name"] == n["name"]
        assert s["mem_total_bytes"] == pytest.approx(n["mem_total_bytes"], rel=0.01)


def test_memory_used_agrees_with_nvidia_smi(gpu_count: int) -> None:
    """NVML v2 memory info leaves the driver's reserved memory out of "used", as
    nvidia-smi does (v1 said 615 MiB used on an idle H200 where nvidia-smi said 0)."""
    import shutil

    smi = shutil.which("nvidia-smi")
    if smi is None:
        pytest.skip("nvidia-smi not on PATH")
    reader = probe_gpus.NvmlReader()
    try:
        via_nvml = reader.read()
    finally:
        reader.close()
    via_smi = probe_gpus.NvidiaSmiReader(smi).read()
    for s, n in zip(via_smi, via_nvml, strict=True):
        if n.get("mem_info_version") != 2:
            pytest.skip("this driver has no NVML v2 memory info (the v1 fallback is in use)")
        # allocations may move between the two reads: a few MiB apart at most on a quiet GPU
        assert abs(s["mem_used_bytes"] - n["mem_used_bytes"]) <= 64 * 1048576, (s, n)


def statistics_median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)
