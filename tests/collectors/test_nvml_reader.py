"""GPU readers without a GPU: NVML error paths, NVLink mapping, and the nvidia-smi fallback.

RECORDED-ANSWERS FAKE, LABELLED: `recorded_pynvml` below stands in for the `pynvml`
module's *driver calls* only (its constants, error classes and ctypes structs are the real
ones). It exists for what cannot be produced on a machine without a GPU — GpuIsLost,
NotSupported, DriverNotLoaded, an 8-GPU NVLink mesh. The real behaviour on a real H200
(including the real NotSupported answers of a single GPU's NVLink) is proven by
tests/test_gpu.py on the device and recorded in BENCHMARKS.md.

The nvidia-smi fallback runs a real subprocess: a stand-in executable that prints output
recorded in nvidia-smi's documented `--format=csv,noheader,nounits` shape.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pynvml as real
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertop.collectors.probe import nvidia_gpus as probe_gpus

ALL_LINKS = 0xFFFFFFFF


@dataclass
class RecordedGpu:
    util: int = 50
    mem_used: int = 10 << 30
    mem_total: int = 141 << 30
    # the driver's reserved framebuffer: v1 counts it as used, v2 reports it apart
    mem_reserved: int = 0
    mem_v2: bool = True  # False: a driver without nvmlDeviceGetMemoryInfo_v2
    power_mw: int = 300_000
    temp: int = 40
    sm_mhz: int = 1500
    energy_mj: int = 123_456_789
    lost: bool = False
    nvlinks: int | None = None  # None: the driver answers NotSupported (single GPU, PCIe)
    links_down: set[int] = field(default_factory=set)
    tx_kib: int = 0
    rx_kib: int = 0
    # field id -> value; a field not listed answers NVML_ERROR_NOT_SUPPORTED
    error_fields: dict[int, int] = field(default_factory=dict)
    throughput_supported: bool = True


def _raise(code: int) -> None:
    raise real.NVMLError(code)  # the real pynvml maps a code to its NVMLError_* subclass


def recorded_pynvml(gpus: list[RecordedGpu], init_error: int | None = None) -> ModuleType:
    """A `pynvml` whose driver calls answer from `gpus`; everything else is the real module's."""
    m = ModuleType("pynvml")
    for name in dir(real):
        if name.startswith(("NVML", "c_nvml", "nvmlMemory_v")):  # constants, errors, structs
            setattr(m, name, getattr(real, name))
    calls: Counter[str] = Counter()
    requested_pairs: list[list[tuple[int, int]]] = []
    m.calls = calls  # type: ignore[attr-defined]
    m.requested_pairs = requested_pairs  # type: ignore[attr-defined]

    def counted(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[fn.__name__] += 1
            return fn(*args, **kwargs)

        wrapper.__name__ = fn.__name__
        setattr(m, fn.__name__, wrapper)
        return wrapper

    def gpu(h: int) -> RecordedGpu:
        g = gpus[h]
        if g.lost:
            _raise(real.NVML_ERROR_GPU_IS_LOST)
        return g

    @counted
    def nvmlInit() -> None:
        if init_error is not None:
            _raise(init_error)

    @counted
    def nvmlShutdown() -> None:
        pass

    @counted
    def nvmlDeviceGetCount() -> int:
        return len(gpus)

    @counted
    def nvmlDeviceGetHandleByIndex(i: int) -> int:
        return i

    @counted
    def nvmlDeviceGetName(h: int) -> str:
        return "NVIDIA H200"

    @counted
    def nvmlDeviceGetUUID(h: int) -> str:
        return f"GPU-0000000{h}-aaaa-bbbb-cccc-dddddddddddd"

    @counted
    def nvmlDeviceGetUtilizationRates(h: int) -> Any:
        return real.c_nvmlUtilization_t(gpu=gpu(h).util, memory=0)

    @counted
    def nvmlDeviceGetMemoryInfo(h: int, version: int | None = None) -> Any:
        g = gpu(h)
        free = g.mem_total - g.mem_used - g.mem_reserved
        if version is None:  # v1: the reserved memory is part of "used"
            return real.c_nvmlMemory_t(total=g.mem_total, free=free, used=g.mem_used + g.mem_reserved)
        if not g.mem_v2:
            _raise(real.NVML_ERROR_FUNCTION_NOT_FOUND)  # what the real binding raises
        return real.c_nvmlMemory_v2_t(
            version=version, total=g.mem_total, reserved=g.mem_reserved, free=free, used=g.mem_used
        )

    @counted
    def nvmlDeviceGetPowerUsage(h: int) -> int:
        return gpu(h).power_mw

    @counted
    def nvmlDeviceGetTemperature(h: int, sensor: int) -> int:
        return gpu(h).temp

    @counted
    def nvmlDeviceGetClockInfo(h: int, clock: int) -> int:
        return gpu(h).sm_mhz

    @counted
    def nvmlDeviceGetCurrentClocksEventReasons(h: int) -> int:
        return 0

    @counted
    def nvmlDeviceGetTotalEccErrors(h: int, kind: int, counter: int) -> int:
        return 0

    @counted
    def nvmlDeviceGetTotalEnergyConsumption(h: int) -> int:
        return gpu(h).energy_mj

    @counted
    def nvmlDeviceGetNvLinkState(h: int, link: int) -> int:
        g = gpu(h)
        if g.nvlinks is None:
            _raise(real.NVML_ERROR_NOT_SUPPORTED)
        if link >= g.nvlinks:
            _raise(real.NVML_ERROR_INVALID_ARGUMENT)
        return real.NVML_FEATURE_DISABLED if link in g.links_down else real.NVML_FEATURE_ENABLED

    @counted
    def nvmlDeviceGetFieldValues(h: int, pairs: list[tuple[int, int]]) -> Any:
        g = gpu(h)
        requested_pairs.append(list(pairs))
        values = (real.c_nvmlFieldValue_t * len(pairs))()
        for k, (fid, scope) in enumerate(pairs):
            values[k].fieldId, values[k].scopeId = fid, scope
            values[k].valueType = real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            answer: int | None = None
            if g.nvlinks is not None and scope == ALL_LINKS:
                if fid == 138 and g.throughput_supported:
                    answer = g.tx_kib
                elif fid == 139 and g.throughput_supported:
                    answer = g.rx_kib
                elif fid in g.error_fields:
                    answer = g.error_fields[fid]
            if answer is None:
                values[k].nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
            else:
                values[k].nvmlReturn = real.NVML_SUCCESS
                values[k].value.ullVal = answer
        return values

    return m


@pytest.fixture
def use_pynvml(monkeypatch: pytest.MonkeyPatch):
    def install(module: ModuleType | None) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", module)

    return install


# ---------------------------------------------------------------------------- NVML error paths


def test_driver_not_loaded_gives_no_gpus_and_a_note(use_pynvml: Any) -> None:
    use_pynvml(recorded_pynvml([], init_error=real.NVML_ERROR_DRIVER_NOT_LOADED))
    reader, note = probe_gpus.open_gpus()
    assert reader is None
    assert note is not None and "no NVIDIA driver" in note and "DriverNotLoaded" in note


def test_gpu_lost_marks_that_gpu_and_reads_the_others(use_pynvml: Any) -> None:
    use_pynvml(recorded_pynvml([RecordedGpu(), RecordedGpu(lost=True), RecordedGpu(util=97)]))
    reader = probe_gpus.NvmlReader()
    gpus = reader.read()
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert gpus[1]["healthy"] is False and gpus[1]["error"] == "GPU is lost"
    assert "util_pct" not in gpus[1] and "power_w" not in gpus[1]
    assert gpus[2]["healthy"] is True and gpus[2]["util_pct"] == 97.0
    assert gpus[0]["power_w"] == 300.0 and gpus[0]["mem_total_bytes"] == 141 << 30


def test_single_gpu_without_nvlink_leaves_fields_absent_and_stops_asking(use_pynvml: Any) -> None:
    fake = recorded_pynvml([RecordedGpu(nvlinks=None)])
    use_pynvml(fake)
    reader = probe_gpus.NvmlReader()
    first = reader.read()[0]
    for key in ("nvlink_links_total", "nvlink_links_up", "nvlink_tx_bytes_total",
                "nvlink_rx_bytes_total", "nvlink_errors_total"):
        assert first.get(key) is None, key  # unknown, never 0
    asked = fake.calls["nvmlDeviceGetNvLinkState"]
    assert asked == 1  # link 0 answered NotSupported: no NVLink, no need to try 1..N
    assert fake.calls["nvmlDeviceGetFieldValues"] == 0
    for _ in range(5):
        reader.read()
    assert fake.calls["nvmlDeviceGetNvLinkState"] == asked  # cached: no cost per tick
    assert fake.calls["nvmlDeviceGetFieldValues"] == 0


def test_nvlink_counts_throughput_and_errors_on_an_8_gpu_mesh(use_pynvml: Any) -> None:
    gpus = [RecordedGpu(nvlinks=18, tx_kib=1000 * i, rx_kib=7, error_fields={161: 2, 162: 1, 163: 0, 52: 99})
            for i in range(8)]
    gpus[3].links_down = {4, 11}
    fake = recorded_pynvml(gpus)
    use_pynvml(fake)
    reader = probe_gpus.NvmlReader()
    out = reader.read()
    assert [g["nvlink_links_total"] for g in out] == [18] * 8
    assert [g["nvlink_links_up"] for g in out] == [18, 18, 18, 16, 18, 18, 18, 18]
    assert out[5]["nvlink_tx_bytes_total"] == 5000 * 1024.0  # KiB → bytes
    assert out[5]["nvlink_rx_bytes_total"] == 7 * 1024.0
    # the newer DL error counters win; the legacy total (field 52) is not added on top
    assert out[0]["nvlink_errors_total"] == 3
    # every field read asks for the all-links scope, never a bare id (which reads link 0 only)
    assert all(scope == ALL_LINKS for pairs in fake.requested_pairs for _, scope in pairs)
    before = fake.calls["nvmlDeviceGetFieldValues"]
    reader.read()
    assert fake.calls["nvmlDeviceGetFieldValues"] - before == 8  # one call per GPU per tick


def test_nvlink_throughput_not_supported_keeps_link_counts(use_pynvml: Any) -> None:
    fake = recorded_pynvml([RecordedGpu(nvlinks=4, throughput_supported=False)])
    use_pynvml(fake)
    reader = probe_gpus.NvmlReader()
    gpu = reader.read()[0]
    assert gpu["nvlink_links_total"] == 4 and gpu["nvlink_links_up"] == 4
    assert gpu.get("nvlink_tx_bytes_total") is None and gpu.get("nvlink_rx_bytes_total") is None
    assert gpu.get("nvlink_errors_total") is None
    # nothing answered on the first read, so no field call is made on later ticks
    before = fake.calls["nvmlDeviceGetFieldValues"]
    reader.read()
    assert fake.calls["nvmlDeviceGetFieldValues"] == before


def test_energy_counter_is_read_on_its_own_slow_cadence(use_pynvml: Any) -> None:
    fake = recorded_pynvml([RecordedGpu()])
    use_pynvml(fake)
    slow = probe_gpus.NvmlReader(energy_every_s=3600)
    assert slow.read()[0]["energy_j_total"] == pytest.approx(123_456.789)
    assert "energy_j_total" not in slow.read()[0]  # left out, not repeated stale, not 0
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    every = probe_gpus.NvmlReader(energy_every_s=0)
    assert all(every.read()[0]["energy_j_total"] is not None for _ in range(3))
    never = probe_gpus.NvmlReader(energy_every_s=None)
    assert "energy_j_total" not in never.read()[0]


def test_readings_become_valid_samples(use_pynvml: Any) -> None:
    from infertop.collectors.probe.schema import sample_from_reading

    use_pynvml(recorded_pynvml([RecordedGpu(nvlinks=18, tx_kib=5), RecordedGpu(lost=True)]))
    reading = {"gpus": probe_gpus.NvmlReader().read(), "nics": [], "host": {}}
    sample = sample_from_reading("n1", "local", reading, 1.0)
    assert sample.error is None and sample.gpus is not None
    assert sample.gpus[0].nvlink_tx_bytes_total == 5120.0
    assert sample.gpus[1].healthy is False


# ---------------------------------------------------------------------------- nvidia-smi

# Recorded in nvidia-smi's `--format=csv,noheader,nounits` shape; the first line holds the
# figures the H200 device machine reported while idle (BENCHMARKS.md).
RECORDED_SMI = """\
0, NVIDIA H200, GPU-eaa14d9f-4cb9-da04-5d7b-190ff1ed3519, 0, 0, 143771, 76.96, 32, 345
1, NVIDIA H200, GPU-11111111-2222-3333-4444-555555555555, 100, 81234, 143771, 689.12, 56, 1980
2, Tesla T4, GPU-22222222-2222-3333-4444-555555555555, [N/A], [Not Supported], 15360, [N/A], 41, [Unknown Error]
"""


def test_parse_recorded_nvidia_smi_output() -> None:
    gpus = probe_gpus.parse_nvidia_smi_csv(RECORDED_SMI)
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert gpus[0] == {
        "index": 0, "kind": "gpu", "name": "NVIDIA H200",
        "uuid": "GPU-eaa14d9f-4cb9-da04-5d7b-190ff1ed3519", "util_pct": 0.0,
        "mem_used_bytes": 0, "mem_total_bytes": 143771 * 1048576, "power_w": 76.96,
        "temp_c": 32.0, "sm_clock_mhz": 345.0,
    }
    assert gpus[1]["util_pct"] == 100.0 and gpus[1]["mem_used_bytes"] == 81234 * 1048576
    t4 = gpus[2]
    assert t4["util_pct"] is None and t4["mem_used_bytes"] is None and t4["power_w"] is None
    assert t4["sm_clock_mhz"] is None and t4["temp_c"] == 41.0  # unknown stays None, never 0


def test_parse_rejoins_a_name_with_a_comma_and_skips_garbage() -> None:
    text = "3, Weird, Name GPU, GPU-x, 5, 1, 2, 3.5, 40, 900\nNVIDIA-SMI has failed\n\n, , ,\nx, a, b, 1, 2, 3, 4, 5, 6\n"
    gpus = probe_gpus.parse_nvidia_smi_csv(text)
    assert len(gpus) == 1
    assert gpus[0]["name"] == "Weird, Name GPU" and gpus[0]["uuid"] == "GPU-x"
    assert gpus[0]["util_pct"] == 5.0 and gpus[0]["sm_clock_mhz"] == 900.0


@given(st.text(max_size=400))
def test_parse_never_raises_on_arbitrary_text(text: str) -> None:
    for gpu in probe_gpus.parse_nvidia_smi_csv(text):
        assert isinstance(gpu["index"], int) and gpu["index"] >= 0


def _stand_in_smi(tmp_path: Path, output: str, rc: int = 0) -> Path:
    """An executable named nvidia-smi that records its argv and prints `output`."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "answer.txt").write_text(output)
    exe = bindir / "nvidia-smi"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import sys, pathlib\n"
        f"pathlib.Path({str(tmp_path / 'argv.txt')!r}).write_text('\\n'.join(sys.argv[1:]))\n"
        f"sys.stdout.write(pathlib.Path({str(tmp_path / 'answer.txt')!r}).read_text())\n"
        f"sys.exit({rc})\n"
    )
    exe.chmod(0o755)
    return exe


def test_smi_reader_runs_the_fixed_argument_list(tmp_path: Path) -> None:
    exe = _stand_in_smi(tmp_path, RECORDED_SMI)
    reader = probe_gpus.NvidiaSmiReader(str(exe))
    gpus = reader.read()
    assert len(gpus) == 3 and gpus[1]["power_w"] == 689.12
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv == [
        "--query-gpu=index,name,uuid,utilization.gpu,memory.used,memory.total,power.draw,"
        "temperature.gpu,clocks.sm",
        "--format=csv,noheader,nounits",
    ]


def test_smi_reader_keeps_gpus_as_failed_when_a_run_breaks(tmp_path: Path) -> None:
    exe = _stand_in_smi(tmp_path, RECORDED_SMI)
    reader = probe_gpus.NvidiaSmiReader(str(exe))
    _stand_in_smi(tmp_path, "Unable to determine the device handle\n", rc=15)
    gpus = reader.read()
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert all(g["error"] == "nvidia-smi failed" and "util_pct" not in g for g in gpus)


def test_open_gpus_falls_back_to_nvidia_smi_without_pynvml(
    tmp_path: Path, use_pynvml: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_pynvml(None)  # `import pynvml` raises ImportError
    exe = _stand_in_smi(tmp_path, RECORDED_SMI)
    monkeypatch.setenv("PATH", str(exe.parent))
    reader, note = probe_gpus.open_gpus()
    assert isinstance(reader, probe_gpus.NvidiaSmiReader)
    assert note is not None and "nvidia-smi" in note
    assert len(reader.read()) == 3


def test_open_gpus_without_pynvml_or_nvidia_smi(tmp_path: Path, use_pynvml: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    use_pynvml(None)
    monkeypatch.setenv("PATH", str(tmp_path))
    reader, note = probe_gpus.open_gpus()
    assert reader is None and note == "pynvml not installed: no GPU figures"


def test_open_gpus_when_nvidia_smi_fails(tmp_path: Path, use_pynvml: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    use_pynvml(None)
    exe = _stand_in_smi(tmp_path, "NVIDIA-SMI has failed because it couldn't communicate\n", rc=9)
    monkeypatch.setenv("PATH", str(exe.parent))
    reader, note = probe_gpus.open_gpus()
    assert reader is None and note is not None and "nvidia-smi failed" in note
    assert os.environ["PATH"] == str(exe.parent)


# ---------------------------------------------------------------------------- memory v2 / v1


def test_memory_used_is_v2_like_nvidia_smi_when_the_driver_has_it(use_pynvml: Any) -> None:
    # an idle H200 as measured: NVML v1 said 615 MiB used, nvidia-smi 0
    nv = recorded_pynvml([RecordedGpu(mem_used=0, mem_reserved=615 << 20, mem_total=143771 << 20)])
    use_pynvml(nv)
    reader = probe_gpus.NvmlReader()
    [gpu] = reader.read()
    assert gpu["mem_used_bytes"] == 0 and gpu["mem_info_version"] == 2
    assert gpu["mem_total_bytes"] == 143771 << 20
    reader.read()
    assert nv.calls["nvmlDeviceGetMemoryInfo"] == 2  # one v2 call per reading, no v1


def test_memory_falls_back_to_v1_once_and_says_so(use_pynvml: Any) -> None:
    nv = recorded_pynvml([RecordedGpu(mem_used=1139 << 20, mem_reserved=615 << 20, mem_v2=False)])
    use_pynvml(nv)
    reader = probe_gpus.NvmlReader()
    [gpu] = reader.read()
    # v1's "used" includes the reserved memory (1754 MiB where nvidia-smi says 1139)
    assert gpu["mem_used_bytes"] == 1754 << 20 and gpu["mem_info_version"] == 1
    reader.read()
    reader.read()
    # v2 asked once (missing), then v1 only: 1 + 3 calls
    assert nv.calls["nvmlDeviceGetMemoryInfo"] == 4


def test_the_fallback_reaches_the_sample_and_the_node_screen(use_pynvml: Any) -> None:
    from infertop.collectors.probe.schema import sample_from_reading
    from infertop.monitor.snapshot import GpuView, NodeView
    from infertop.tui.node_rows import notes_text

    def node_text(driver_has_v2: bool) -> tuple[list[int | None], str]:
        use_pynvml(recorded_pynvml([RecordedGpu(mem_v2=driver_has_v2), RecordedGpu(mem_v2=driver_has_v2)]))
        gpus = probe_gpus.NvmlReader().read()
        sample = sample_from_reading("n", "local", {"gpus": gpus}, 1.0)
        assert sample.gpus is not None
        views = [GpuView(index=g.index, mem_info_version=g.mem_info_version) for g in sample.gpus]
        node = NodeView(name="n", role="decode", status="ok", gpus=views)
        return [g.mem_info_version for g in sample.gpus], notes_text(node).plain

    versions, text = node_text(driver_has_v2=False)
    assert versions == [1, 1] and "GPU 0, 1 memory from NVML v1" in text
    versions, text = node_text(driver_has_v2=True)
    assert versions == [2, 2] and "NVML v1" not in text
