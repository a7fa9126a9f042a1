"""Settling, not guessing (issue 46): a rate is known once its readings span one interval,
and a port's byte rate above its line rate is never a figure."""

from __future__ import annotations

import pytest

from infertop.collectors.sample import NicSample, NodeSample
from infertop.demo.diagnosis import IB_GBPS
from infertop.monitor.evaluation.cluster import settle_span_s
from infertop.monitor.evaluation.figures import nic_counters, nic_views
from infertop.monitor.evaluation.window_rates import WindowRates
from infertop.monitor.snapshot import Snapshot
from tests.support.issue46_cluster import run_cluster


def _sample(at: float, rx_bytes: float) -> NodeSample:
    return NodeSample(node="n", source="test", taken_at=at,
                      nics=[NicSample(name="mlx5_0", kind="infiniband", state="active", speed_gbps=400.0,
                                      rx_bytes_total=rx_bytes, tx_bytes_total=0.0)])


@pytest.mark.parametrize(("gap_s", "known"), [(0.3, False), (0.85, False), (0.95, True), (1.0, True), (2.0, True)])
def test_a_rate_is_shown_once_its_readings_span_one_interval(gap_s: float, known: bool) -> None:
    rates = WindowRates(nic_counters)
    rates.min_span_s = settle_span_s(1.0)
    rates.update([_sample(0.0, 0.0), _sample(gap_s, 10e9 * gap_s)])
    rate = rates.rate(("mlx5_0", "rx_bytes_total"))
    assert (rate is not None) == known
    if known:
        assert rate == pytest.approx(10e9)


def test_a_byte_rate_above_line_rate_is_withheld_and_said() -> None:
    # 415 Gb/s on a 400 Gb/s port: a measurement, not a speed
    (view,) = nic_views([_sample(0.0, 0.0), _sample(1.0, 415e9 / 8)], None)
    assert view.rx_bytes_per_s is None and view.above_line_rate is True
    assert view.tx_bytes_per_s == 0.0
    (fine,) = nic_views([_sample(0.0, 0.0), _sample(1.0, 380e9 / 8)], None)
    assert fine.rx_bytes_per_s == pytest.approx(380e9 / 8) and fine.above_line_rate is None


def test_the_first_frames_show_no_rate_above_its_bound() -> None:
    frames: list[Snapshot] = run_cluster(ticks=4)
    first = frames[0]
    # one reading each: nothing is a rate yet
    assert all(n.engine is None or n.engine.decode_steps_per_s is None for n in first.nodes)
    assert all(nic.rx_bytes_per_s is None for n in first.nodes for nic in n.nics)
    for frame in frames[1:]:
        for node in frame.nodes:
            assert node.engine is not None and node.engine.decode_steps_per_s is not None
            assert node.engine.decode_steps_per_s <= 40.0 * 1.02  # no engine steps faster than 40
            for nic in node.nics:
                line = (nic.speed_gbps or 0) * 1e9 / 8
                assert all(r is None or r <= line for r in (nic.rx_bytes_per_s, nic.tx_bytes_per_s))
            assert node.rx_bytes_per_s is None or node.rx_bytes_per_s <= (4 * IB_GBPS + 100) * 1e9 / 8
