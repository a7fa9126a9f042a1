"""Goodput and the cost of a good token (issue 43), computed by hand from the same buckets:
the share within the [slo] targets is exact where a target is a bucket bound and a
stated range where a bucket straddles it — never a point inside the bucket."""

from __future__ import annotations

import math

import pytest

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.goodput import (
    ShareBounds,
    attainment_fields,
    goodput,
    misses_p99,
    share_bounds,
)
from infertop.monitor.evaluation.latency import Buckets, percentile
from infertop.monitor.monitor import Monitor
from infertop.tui.session_panel import goodput_line

INF = math.inf
# cumulative (le, count) over a window: 50 at ≤ 0.1 s, 80 at ≤ 0.25, 95 at ≤ 0.5, 100 in all
WINDOW = ((0.1, 50.0), (0.25, 80.0), (0.5, 95.0), (INF, 100.0))


@pytest.mark.parametrize(("target", "expected"), [
    (0.25, ShareBounds(0.8, 0.8)),  # a bucket bound: exact
    (0.3, ShareBounds(0.8, 0.95, (0.25, 0.5))),  # inside 0.25–0.5: between, said
    (0.05, ShareBounds(0.0, 0.5, (0.0, 0.1))),
    (1.0, ShareBounds(0.95, 1.0, (0.5, None))),  # past the highest bound: the +Inf bucket
])
def test_share_within_a_target_by_hand(target: float, expected: ShareBounds) -> None:
    assert share_bounds(WINDOW, target) == expected


def test_no_request_is_unknown_not_good() -> None:
    assert share_bounds(((0.1, 0.0), (INF, 0.0)), 0.1) is None
    assert goodput(None, WINDOW, 0.2, 0.25).share_low is None


def test_two_targets_are_bounded_not_multiplied() -> None:
    itl = ((0.025, 600.0), (0.05, 900.0), (INF, 1000.0))  # 90 % of gaps within 50 ms
    g = goodput(WINDOW, itl, 0.3, 0.05)
    # TTFT 80–95 %, ITL exactly 90 %: both at least 0.8 + 0.9 − 1, at most min(0.95, 0.9)
    assert (g.share_low, g.share_high) == pytest.approx((0.7, 0.9))
    assert g.note is not None
    assert "TTFT target 300 ms inside the bucket 250 ms–500 ms: 80.0–95.0 % within" in g.note
    assert "not joint" in g.note


LAYOUT = """
[cluster]
window_s = 10
[pricing]
node_hour_usd = 36.0
[slo]
ttft_p99_s = {ttft}
[[nodes]]
name = "d1"
role = "decode"
[[nodes]]
name = "d2"
role = "decode"
"""


def buckets(requests: float) -> tuple[tuple[float, float], ...]:
    """Cumulative TTFT buckets after `requests` requests: 50 %, 80 %, 95 %, 100 % by bound."""
    return tuple((le, requests * share) for le, share in ((0.1, 0.5), (0.25, 0.8), (0.5, 0.95), (INF, 1.0)))


def run(ttft_target: float) -> Monitor:
    monitor = Monitor(parse_layout(LAYOUT.format(ttft=ttft_target)), sources=[], clock=lambda: 1.8e9)
    for step in range(11):
        at = 1.8e9 + step
        for name, per_s in (("d1", 10.0), ("d2", 30.0)):
            engine = EngineSample(generation_tokens_total=1000.0 * per_s * step / 10, requests_running=4.0,
                                  latency_buckets={"ttft": buckets(per_s * step)})
            monitor.fleet.ingest(NodeSample(node=name, source="scrape", taken_at=at, engine=engine))
    return monitor


def test_a_pool_and_the_session_by_hand_from_the_same_buckets() -> None:
    monitor = run(0.3)
    snapshot = monitor.tick(1.8e9 + 10)
    pool = snapshot.cluster.roles["decode"]
    # 400 requests in the window (100 + 300): ≤ 0.25 s 320, ≤ 0.5 s 380 → 80–95 % within 0.3 s
    assert (pool.goodput_share_low, pool.goodput_share_high) == pytest.approx((0.8, 0.95))
    assert pool.goodput_note is not None and "inside the bucket 250 ms–500 ms" in pool.goodput_note
    # $72/h for 4,000 tokens/s (1,000 + 3,000): $5.00 per 1M; good tokens 80–95 % of them
    assert pool.usd_per_million_output_tokens_now == pytest.approx(72.0 / (4000 * 3600) * 1e6)
    assert pool.usd_per_million_good_tokens_low == pytest.approx(72.0 / (4000 * 0.95 * 3600) * 1e6)
    assert pool.usd_per_million_good_tokens_high == pytest.approx(72.0 / (4000 * 0.8 * 3600) * 1e6)
    session = snapshot.session
    assert session.goodput_share_low == pytest.approx(0.8)
    assert session.usd_per_million_good_tokens_high == pytest.approx(6.25)
    line = goodput_line(session)
    assert line is not None
    assert line.plain.startswith("now within SLO 80.0–95.0 %  $/1M good tok $5.263–$6.250  plain $5.000")
    data = snapshot.to_json_dict()["session"]
    assert data["usd_per_million_good_tokens_low"] == 5.26  # type: ignore[index]


def test_a_target_on_a_bucket_bound_is_exact() -> None:
    snapshot = run(0.25).tick(1.8e9 + 10)
    pool = snapshot.cluster.roles["decode"]
    assert pool.goodput_share_low == pool.goodput_share_high == pytest.approx(0.8)
    assert pool.goodput_note is None
    line = goodput_line(snapshot.session)
    assert line is not None and line.plain.startswith("now within SLO 80.0 %  $/1M good tok $6.250  plain $5.000")


def test_the_report_carries_the_last_windows_goodput() -> None:
    from infertop.monitor.record.report import _money_lines

    session = run(0.3).tick(1.8e9 + 10).session
    lines = dict(_money_lines(session, None))
    assert lines["within the SLO targets (last window)"] == "80.0%–95.0%"
    assert lines["$ per 1M good output tokens (last window)"] == "$5.2632–$6.2500"
    assert lines["$ per 1M output tokens (last window)"] == "$5.0000"
    assert "inside the bucket 250 ms–500 ms" in lines["goodput bounds"]


# the one SLO-share rule: the `slo` verdict's miss and every `slo_*_attainment` figure come
# from `share_bounds`; a miss is exactly "the p99's whole bucket lies past the target"
@pytest.mark.parametrize(("buckets", "target", "low", "high", "miss"), [
    (WINDOW, 0.25, 0.8, 0.8, True),  # a bound: exactly 80 % within
    (WINDOW, 0.3, 0.8, 0.95, True),  # straddled, at most 95 %: a miss whatever lies inside
    (WINDOW, 0.6, 0.95, 1.0, False),  # straddling the +Inf bucket: 99 % may be within
    (((0.1, 99.0), (0.2, 100.0), (INF, 100.0)), 0.05, 0.0, 0.99, False),  # at most 99 %: no miss
    (((0.1, 98.0), (0.2, 100.0), (INF, 100.0)), 0.1, 0.98, 0.98, True),
    (((0.1, 0.0), (INF, 0.0)), 0.1, None, None, False),  # no request: unknown, no miss
])
def test_one_rule_for_the_share_within_a_target(
    buckets: Buckets, target: float, low: float | None, high: float | None, miss: bool
) -> None:
    bounds = share_bounds(buckets, target)
    fields = attainment_fields("ttft", bounds)
    assert (fields["slo_ttft_attainment"], fields["slo_ttft_attainment_high"]) == (
        (pytest.approx(low), pytest.approx(high)) if low is not None else (None, None))
    assert misses_p99(bounds) is miss
    p99 = percentile(buckets, 0.99)
    # the same decision as the p99's bucket: wholly past the target (its lower bound at or past it)
    assert miss is (p99 is not None and p99.lower_s >= target)
