"""node_exporter 1.12.1 pages re-created from its collectors' own definitions
(tests/support/upstream_pages.py), two scrapes 15 s apart with one HCA reset in between: every
port figure, error rates included, checked against the truth within 2 %."""

from __future__ import annotations

from typing import Any

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.sample import NicSample, NodeSample
from infertop.monitor.evaluation.figures import nic_views
from infertop.monitor.snapshot import NicView
from tests.support.upstream_pages import load_truth, page_files, render

NAME = "node-exporter-1.12.1"


def samples() -> list[NodeSample]:
    truth = load_truth(NAME)
    out = []
    for state, path in zip(truth["scrapes"], page_files(NAME), strict=True):
        text = path.read_text(encoding="utf-8")
        parts = parts_from_exporter(parse_exposition(text, path.name, wanted=EXPORTER_WANTED))
        nics = parts["nics"]
        assert isinstance(nics, list)
        out.append(NodeSample(node="n", source="scrape", taken_at=state["taken_at"], nics=nics))
    return out


def views() -> dict[str, NicView]:
    return {v.name: v for v in nic_views(samples(), None)}


def test_fixture_pages_are_what_the_truth_renders() -> None:
    assert render(NAME) == [p.read_text(encoding="utf-8") for p in page_files(NAME)]


def test_every_port_figure_matches_the_truth() -> None:
    got = views()
    expect: dict[str, dict[str, Any]] = load_truth(NAME)["expect"]
    for port, figures in expect.items():
        for figure, want in figures.items():
            value = getattr(got[port], figure)
            if isinstance(want, str):
                assert value == want, (port, figure)
            else:
                assert value is not None, (port, figure)
                assert abs(value - want) <= 0.02 * abs(want) + 1e-9, (port, figure, value, want)


def test_a_counter_reset_is_an_increase_from_zero_not_a_negative_rate() -> None:
    mlx5_1 = views()["mlx5_1"]
    # port_errors_received 5000 → 30 after the reset: 30 errors in 15 s, not -331/s
    assert mlx5_1.rx_errors_per_s == pytest.approx(2.0)
    assert mlx5_1.link_recoveries_per_s == 0


def test_error_counters_are_read_from_both_collectors() -> None:
    first = {n.name: n for n in samples()[0].nics or []}
    ib: NicSample = first["mlx5_0"]
    assert ib.rx_errors_total == 120 and ib.link_recoveries_total == 4
    assert ib.link_integrity_errors_total == 0 and ib.physical_state == "link_up"
    assert first["mlx5_2"].physical_state == "polling"
    eth: NicSample = first["eth0"]
    assert eth.rx_errors_total == 2 and eth.rx_drops_total == 100 and eth.tx_errors_total == 0


def test_nic_errors_unseen_when_the_page_has_no_error_counters() -> None:
    text = page_files(NAME)[0].read_text(encoding="utf-8")
    bare = "\n".join(
        line for line in text.splitlines()
        if not any(k in line for k in ("_errs_total", "errors_received", "error_recovery",
                                       "integrity", "_drop_total", "discards"))
    )
    assert "unseen" not in parts_from_exporter(parse_exposition(text))
    unseen = parts_from_exporter(parse_exposition(bare))["unseen"]
    assert isinstance(unseen, dict) and set(unseen) == {"nic_errors"}


def test_the_node_screen_shows_the_errors_per_port() -> None:
    from infertop.tui.node_rows import NIC_COLUMNS, nic_row

    got = views()
    errors_col = [key for key, _, _ in NIC_COLUMNS].index("errors")
    # rx errors 3/s + link recoveries 0.067/s (+ symbol errors 0/s) on mlx5_0
    assert nic_row(got["mlx5_0"])[errors_col].plain == "3.1"
    assert nic_row(got["eth0"])[errors_col].plain == "1.0"
    assert nic_row(got["eth1"])[errors_col].plain == "0.0"
