"""npu-exporter pages (both label generations) → NPU and NPU-RoCE samples."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.collectors.pages.ascend import ASCEND_WANTED, ascend_parts
from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import Exposition, parse_exposition
from infertop.collectors.sample import GpuSample, NicSample

FIXTURES = Path(__file__).parent.parent / "fixtures" / "npu"
MIB = 1024 * 1024


def page(name: str) -> Exposition:
    return parse_exposition((FIXTURES / f"npu_exporter_{name}.txt").read_text(), name, wanted=EXPORTER_WANTED)


@pytest.mark.parametrize("generation", ["current", "old"])
def test_chips_become_npu_samples(generation: str) -> None:
    parts = parts_from_exporter(page(generation))  # through the scrape source's own hook
    gpus = parts["gpus"]
    assert isinstance(gpus, list) and [g.index for g in gpus] == [0, 1, 2, 3]
    first = gpus[0]
    assert isinstance(first, GpuSample)
    assert first.kind == "npu"
    assert first.name == "910B3-Ascend-V1"
    assert first.uuid == "64036E64-00A07559-5C350CF2-B9D00485-104301E2"
    assert first.util_pct == 78  # AI-core utilisation, not the overall figure
    assert first.mem_used_bytes == 52164 * MIB and first.mem_total_bytes == 65536 * MIB
    assert first.power_w == 302.5 and first.temp_c == 43
    assert first.sm_clock_mhz == 1800
    assert first.healthy is True and first.error is None
    assert gpus[3].healthy is False
    if generation == "current":
        assert gpus[3].error == "unhealthy (error code 0x80e01801)"
    else:
        assert gpus[3].error == "unhealthy"


@pytest.mark.parametrize("generation", ["current", "old"])
def test_roce_ports_belong_to_their_npu(generation: str) -> None:
    nics = parts_from_exporter(page(generation))["nics"]
    assert isinstance(nics, list)
    by_name = {n.name: n for n in nics}
    assert sorted(by_name) == ["npu0-roce", "npu1-roce", "npu2-roce", "npu3-roce"]
    broken = by_name["npu2-roce"]
    assert isinstance(broken, NicSample)
    assert broken.kind == "npu-roce" and broken.accelerator_index == 2
    assert broken.state == "down" and broken.is_up is False
    assert broken.speed_gbps == 200.0
    assert broken.link_downed_total == 6  # came up 7 times: went down 6
    expected_errors = 1532 + 211 + (96 if generation == "current" else 0)
    assert broken.errors_total == expected_errors
    healthy = by_name["npu0-roce"]
    assert healthy.state == "up" and healthy.errors_total == 0 and healthy.link_downed_total == 0
    assert healthy.rx_bytes_total is None  # the exporter gives a MB/s gauge, never a counter


def test_missing_chips_are_noted() -> None:
    text = (FIXTURES / "npu_exporter_current.txt").read_text().replace("machine_npu_nums 4", "machine_npu_nums 8")
    parts = ascend_parts(parse_exposition(text, "x", wanted=ASCEND_WANTED))
    assert parts["notes"] == ["npu-exporter reports 4 of 8 NPUs"]


def test_not_an_npu_page() -> None:
    assert ascend_parts(parse_exposition("node_load1 0.5\n", "x")) == {}


def test_hostile_labels_are_cleaned() -> None:
    text = 'npu_chip_info_utilization{id="0",model_name="\\u001b[31m[bold]910B[/bold]"} 5\n'
    (gpu,) = ascend_parts(parse_exposition(text.replace("\\u001b", "\x1b"), "x"))["gpus"]  # type: ignore[misc]
    assert gpu.name is not None and "\x1b" not in gpu.name


_names = st.sampled_from(sorted(ASCEND_WANTED))
_label_keys = st.sampled_from(["id", "npuID", "model_name", "modelName", "vdie_id", "uuid", "name", "x"])
_label_values = st.one_of(st.integers(-5, 70000).map(str), st.text(max_size=20))
_values = st.floats(allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_names, st.dictionaries(_label_keys, _label_values, max_size=4), _values), max_size=40))
def test_any_page_maps_without_raising(series: list[tuple[str, dict[str, str], float]]) -> None:
    families = Exposition()
    for name, labels, value in series:
        families.samples.setdefault(name, []).append((labels, value))
    parts = ascend_parts(families)
    for gpu in parts.get("gpus", []):  # type: ignore[attr-defined]
        assert gpu.kind == "npu"
    for nic in parts.get("nics", []):  # type: ignore[attr-defined]
        assert nic.kind == "npu-roce" and nic.accelerator_index is not None
