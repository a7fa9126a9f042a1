"""npu-exporter v26.1.0 pages re-created from mind-cluster's own collectors
(tests/support/upstream_pages.py): 910B with one RoCE port and HCCS per chip, 910A5 / Atlas 350
with per-(udie, port) network series. Every figure checked against the truth within 2 %;
a failed read (-1) is unknown, never unhealthy or down."""

from __future__ import annotations

from typing import Any

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.monitor.evaluation.figures import nic_views
from tests.support.upstream_pages import load_truth, page_files, render

NPU_FIXTURES = ("npu-exporter-910b-v26.1.0", "npu-exporter-910a5-v26.1.0")


def read(name: str) -> tuple[dict[str, Any], dict[str, object]]:
    [path] = page_files(name)
    text = path.read_text(encoding="utf-8")
    return load_truth(name), parts_from_exporter(parse_exposition(text, name, wanted=EXPORTER_WANTED))


def check(got: object, want: dict[str, Any], where: str) -> None:
    for figure, value in want.items():
        have = getattr(got, figure)
        if value is None or isinstance(value, (bool, str)):
            assert have == value, (where, figure, have)
        else:
            assert have is not None and abs(have - value) <= 0.02 * abs(value) + 1e-9, (
                where, figure, have, value)


@pytest.mark.parametrize("name", NPU_FIXTURES)
def test_fixture_is_the_page_its_truth_renders(name: str) -> None:
    [path] = page_files(name)
    assert render(name) == [path.read_text(encoding="utf-8")]


@pytest.mark.parametrize("name", NPU_FIXTURES)
def test_every_npu_figure_matches_the_truth(name: str) -> None:
    truth, parts = read(name)
    gpus: dict[int, GpuSample] = {g.index: g for g in parts["gpus"]}  # type: ignore[attr-defined]
    for index, want in truth["expect_gpus"].items():
        check(gpus[int(index)], want, f"{name} NPU {index}")


@pytest.mark.parametrize("name", NPU_FIXTURES)
def test_every_port_figure_matches_the_truth(name: str) -> None:
    truth, parts = read(name)
    nics: dict[str, NicSample] = {n.name: n for n in parts["nics"]}  # type: ignore[attr-defined]
    assert sorted(nics) == sorted(truth["expect_nics"])  # every port, not the first per chip
    for port, want in truth["expect_nics"].items():
        check(nics[port], want, f"{name} {port}")
    assert sorted(parts.get("unseen", {})) == truth["expect_unseen"]  # type: ignore[call-overload]


def test_npu_traffic_reaches_the_port_views() -> None:
    # the link checks read NicView rates: the MB/s gauges must get there as bytes/s
    _, parts = read("npu-exporter-910b-v26.1.0")
    sample = NodeSample(node="n", source="scrape", taken_at=1.0, nics=parts["nics"])  # type: ignore[arg-type]
    views = {v.name: v for v in nic_views([sample], None)}
    assert views["npu0-roce"].tx_bytes_per_s == pytest.approx(1790.6e6)
    assert views["npu0-roce"].rx_bytes_per_s == pytest.approx(1843.2e6)


def test_a_failed_read_is_unknown_not_unhealthy() -> None:
    _, parts = read("npu-exporter-910b-v26.1.0")
    chip2 = next(g for g in parts["gpus"] if g.index == 2)  # type: ignore[attr-defined]
    assert chip2.healthy is None and chip2.error is None  # health -1: not "unhealthy"
    port2 = next(n for n in parts["nics"] if n.name == "npu2-roce")  # type: ignore[attr-defined]
    assert port2.state is None and port2.is_up is None  # link status -1: not "down"


def test_older_exporters_minus_one_power_and_temperature_are_unknown() -> None:
    # older npu-exporter builds printed -1 for a failed power / temperature read
    text = (
        'npu_chip_info_power{id="0",model_name="910B3"} -1 1764405258245\n'
        'npu_chip_info_temperature{id="0",model_name="910B3"} -1 1764405258245\n'
        'npu_chip_info_health_status{id="0",model_name="910B3"} 1 1764405258245\n'
    )
    [gpu] = parts_from_exporter(parse_exposition(text))["gpus"]  # type: ignore[misc]
    assert gpu.power_w is None and gpu.temp_c is None and gpu.healthy is True


def test_missing_speed_and_traffic_are_said() -> None:
    _, _parts = read("npu-exporter-910b-v26.1.0")
    text = page_files("npu-exporter-910b-v26.1.0")[0].read_text(encoding="utf-8")
    bare = "\n".join(line for line in text.splitlines()
                     if "link_speed" not in line and "bandwidth_" not in line)
    unseen = parts_from_exporter(parse_exposition(bare))["unseen"]
    assert isinstance(unseen, dict) and set(unseen) == {"npu_link_speed", "npu_traffic"}
