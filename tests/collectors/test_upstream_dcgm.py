"""dcgm-exporter pages re-created from dcgm-exporter 4.5.3-4.8.2's own counters CSVs and
page template (tests/support/upstream_pages.py): every figure infertop reads is checked against
the truth the page was driven with, within 2 %, and what the page lacks is said."""

from __future__ import annotations

from typing import Any

import pytest

from infertop.collectors.pages.dcgm import gpu_samples_from_dcgm
from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.sample import GpuSample, NodeSample
from infertop.monitor.evaluation.figures import gpu_views
from tests.support.upstream_pages import load_truth, page_files, render

DCGM_FIXTURES = (
    "dcgm-default-4.5.3-4.8.2",
    "dcgm-old-namespace-4.5.3-4.8.2",
    "dcgm-recommended-4.5.3-4.8.2",
    "dcgm-per-link-4.5.3-4.8.2",
)
# truth keys that are GpuSample figures (the others drive the page only)
FIGURES = (
    "util_pct", "power_w", "temp_c", "sm_clock_mhz", "mem_used_bytes", "mem_total_bytes",
    "energy_j_total", "xid_last", "clock_event_reasons", "ecc_uncorrected_total",
    "nvlink_errors_total", "nvlink_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s",
    "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct",
)


def within_2pct(got: float | None, want: float) -> bool:
    return got is not None and abs(got - want) <= 0.02 * abs(want) + 1e-9


def read(name: str) -> tuple[dict[str, Any], dict[str, object]]:
    [path] = page_files(name)
    text = path.read_text(encoding="utf-8")
    # as the scrape source reads it: only the wanted names are parsed
    return load_truth(name), parts_from_exporter(parse_exposition(text, name, wanted=EXPORTER_WANTED))


@pytest.mark.parametrize("name", DCGM_FIXTURES)
def test_fixture_is_the_page_its_truth_renders(name: str) -> None:
    # the committed page is exactly what the upstream definitions give for the truth
    [path] = page_files(name)
    assert render(name) == [path.read_text(encoding="utf-8")]


@pytest.mark.parametrize("name", DCGM_FIXTURES)
def test_every_figure_matches_the_truth(name: str) -> None:
    truth, parts = read(name)
    gpus = parts["gpus"]
    assert isinstance(gpus, list)
    by_index = {g.index: g for g in gpus}
    assert sorted(by_index) == [g["index"] for g in truth["gpus"]]
    for want in truth["gpus"]:
        got: GpuSample = by_index[want["index"]]
        assert got.uuid == want["uuid"], name  # `UUID`, or `uuid` in old-namespace mode
        assert got.name == want["model"]
        for figure in FIGURES:
            if figure not in want or figure in truth["expect_none"]:
                continue
            value = getattr(got, figure)
            assert within_2pct(value, want[figure]), (name, want["index"], figure, value, want[figure])
        for figure in truth["expect_none"]:
            assert getattr(got, figure) is None, (name, figure)  # not on the page: unknown


@pytest.mark.parametrize("name", DCGM_FIXTURES)
def test_what_the_page_lacks_is_said(name: str) -> None:
    truth, parts = read(name)
    unseen = parts.get("unseen", {})
    assert isinstance(unseen, dict)
    assert sorted(unseen) == sorted(truth["expect_unseen"])
    if "clock_events" in unseen:
        assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in unseen["clock_events"]
        assert "docs/dcgm-counters.csv" in unseen["clock_events"]


def test_default_nvlink_total_unit_is_1000_kib_per_s() -> None:
    # DCGM field 449 is (ΔKiB TX+RX)/s/1000: reading it as MB (1e6) would be 2.4 % low
    truth, parts = read("dcgm-default-4.5.3-4.8.2")
    [g0, _] = parts["gpus"]  # type: ignore[misc]
    want = truth["gpus"][0]["nvlink_bytes_per_s"]
    assert g0.nvlink_bytes_per_s == pytest.approx(want, rel=1e-5)


def test_nvlink_total_reaches_the_view_and_the_cell() -> None:
    from infertop.tui.node_rows import nvlink_cell

    _, parts = read("dcgm-default-4.5.3-4.8.2")
    sample = NodeSample(node="n", source="scrape", taken_at=1.0, gpus=parts["gpus"])  # type: ignore[arg-type]
    v0, v1 = gpu_views([sample])
    assert v0.nvlink_bytes_per_s == pytest.approx(2.9e11, rel=0.02)
    assert v1.nvlink_bytes_per_s == 0  # idle links: a real 0, not unknown
    # no link count from dcgm: the traffic is still shown (2.9e11 B/s = 2320 Gb/s)
    assert nvlink_cell(v0).plain == "2320 Gb/s"


def test_per_link_series_are_summed_over_every_link() -> None:
    truth, parts = read("dcgm-per-link-4.5.3-4.8.2")
    g0 = parts["gpus"][0]  # type: ignore[index]
    links = truth["per_link"]["DCGM_FI_PROF_NVLINK_TX_BYTES_PER_LINK"][0]["values"]
    assert len(links) == 18
    assert g0.nvlink_tx_bytes_per_s == pytest.approx(sum(links))  # not links[0]
    assert g0.nvlink_errors_total == 7  # 3 on link 5 + 4 on link 11


def test_old_namespace_uuid_label_is_read() -> None:
    text = page_files("dcgm-old-namespace-4.5.3-4.8.2")[0].read_text(encoding="utf-8")
    assert 'uuid="GPU-' in text and 'UUID="' not in text
    gpus = gpu_samples_from_dcgm(parse_exposition(text))
    assert [g.uuid for g in gpus] == [g["uuid"] for g in load_truth("dcgm-old-namespace-4.5.3-4.8.2")["gpus"]]
