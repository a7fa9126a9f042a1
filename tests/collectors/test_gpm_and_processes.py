"""GPM activity and GPU processes on the probe's side without a GPU (issue 35): what the
reader says when GPM is refused, and a probe reading's new fields becoming a sample
(hostile text inert, bounds kept). The real GPM figures are proven on a real H100 by
tests/integration/test_gpu_activity.py (BENCHMARKS.md)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from infertop.collectors.probe.gpm import GpmReader
from infertop.collectors.probe.gpu_processes import describe_process, read_gpu_processes
from infertop.collectors.probe.schema import sample_from_reading


class NoGpmBindings:
    """An nvidia-ml-py older than GPM: none of its calls."""


class Unsupported:
    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        return SimpleNamespace(isSupportedDevice=0)

    def nvmlGpmSampleAlloc(self) -> Any:
        raise AssertionError("never sampled where GPM is not supported")

    nvmlGpmSampleGet = nvmlGpmMetricsGet = nvmlGpmSampleAlloc


def test_gpm_refusals_are_said_once_and_never_asked_again() -> None:
    old = GpmReader(NoGpmBindings(), ["h0"])
    assert old.refused == ["pynvml lacks nvmlGpmSampleAlloc"] and old.read(0) == {}
    unsupported = GpmReader(Unsupported(), ["h0", "h1"])
    assert unsupported.refused == ["GPM not supported on this GPU (isSupportedDevice=0)"] * 2
    assert unsupported.read(1) == {}


def test_this_process_is_described_from_proc() -> None:
    me = describe_process(os.getpid(), 123 << 20)
    assert me["pid"] == os.getpid() and me["gpu_mem_bytes"] == 123 << 20
    assert "pytest" in me["command"] or "python" in me["command"]
    assert "\n" not in me["command"] and len(me["command"]) <= 160
    # NVML's "not available" memory is unknown, not 18 EB
    assert "gpu_mem_bytes" not in describe_process(os.getpid(), 0xFFFFFFFFFFFFFFFF)


def test_process_lists_from_nvml_merge_compute_and_graphics() -> None:
    proc = SimpleNamespace(pid=os.getpid(), usedGpuMemory=1 << 30)

    class Nvml:
        def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
            return [proc]

        def nvmlDeviceGetGraphicsRunningProcesses(self, h: Any) -> list[Any]:
            return [proc, SimpleNamespace(pid=2 ** 22 + 7, usedGpuMemory=None)]

    got = read_gpu_processes(Nvml(), "h")
    assert got is not None and [p["pid"] for p in got] == [os.getpid(), 2 ** 22 + 7]
    assert read_gpu_processes(NoGpmBindings(), "h") is None  # NVML cannot say: unknown


def test_a_probe_reading_carries_activity_and_processes_into_the_sample() -> None:
    reading = {"gpus": [{
        "index": 0, "util_pct": 100.0, "sm_active_pct": 0.8, "sm_occupancy_pct": 0.0, "tensor_active_pct": 0.0,
        "dram_active_pct": 0.0, "activity_source": "gpm",
        "processes": [{"pid": 31337, "user": "alice", "command": "python3 x.py \x1b[31m[red]boom[/red]",
                       "cgroup": "/kubepods/pod1", "gpu_mem_bytes": 6 << 30}],
    }], "nics": [], "host": {}}
    sample = sample_from_reading("n", "ssh", reading, 1.0)
    assert sample.error is None and sample.gpus is not None
    gpu = sample.gpus[0]
    assert gpu.sm_active_pct == 0.8 and gpu.activity_source == "gpm"
    assert gpu.processes is not None and gpu.processes[0].user == "alice"
    assert gpu.processes[0].gpu_mem_bytes == 6 << 30
    command = gpu.processes[0].command or ""
    assert "\x1b" not in command and command.startswith("python3 x.py ")  # the escape shown inert
    # a reading that is not one becomes an error sample, never an exception
    bad = sample_from_reading("n", "ssh", {"gpus": [{"index": 0, "processes": "nope"}]}, 1.0)
    assert bad.error is not None and bad.error.startswith("bad probe reading")
