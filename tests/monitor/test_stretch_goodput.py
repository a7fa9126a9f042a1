"""Goodput and $/1M good tokens over the session's billing stretch (issue 43): the share
within the [slo] target from the TTFT bucket counts at the stretch's two edges — the same
edges the ledger reads tokens and spend at — computed here by hand from the pages' counts,
through a restart (the total falls: counted from zero, as the ledger counts tokens) and a
node whose buckets are read on every third reading only."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.format import stretch_words
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.report import _money_lines
from infertop.monitor.snapshot import Snapshot
from infertop.tui.session_panel import stretch_goodput_line

T0 = 1_800_000_000.0
BOUNDS = (0.1, 0.25, 0.5, math.inf)
LAYOUT = """
[cluster]
interval_s = {step}
window_s = 10

[pricing]
node_hour_usd = 36.0

[slo]
ttft_p99_s = 0.3

[[nodes]]
name = "a"
role = "decode"

[[nodes]]
name = "b"
role = "decode"
"""


def a_counts(n: int) -> tuple[tuple[float, ...], float]:
    """Node a at reading n: each reading adds 10 requests, 5 ≤ 0.1 s, 3 more ≤ 0.25 s, 1
    more ≤ 0.5 s, 1 past it, and 100 tokens; it held 50/80/90/100 and 1,000 tokens when
    first read; it restarts before reading 6 (its counts from zero: one reading's worth)."""
    k = n + 10 if n < 6 else n - 5
    return (5.0 * k, 8.0 * k, 9.0 * k, 10.0 * k), 100.0 * k


def b_counts(n: int) -> tuple[tuple[float, ...], float]:
    """Node b: 10 requests a reading, every one within 0.1 s, and 100 tokens."""
    k = n + 10
    return (10.0 * k,) * 4, 100.0 * k


def run(b_latency_every: int, b_latency_from: int, step_s: float = 1.0, readings: int = 11) -> Snapshot:
    monitor = Monitor(parse_layout(LAYOUT.format(step=step_s)), sources=[], clock=lambda: T0 - 100.0)
    snap = None
    for n in range(readings):
        now = T0 + n * step_s
        for node, counts in (("a", a_counts), ("b", b_counts)):
            buckets, tokens = counts(n)
            read = node == "a" or (n >= b_latency_from and (n - b_latency_from) % b_latency_every == 0)
            monitor.fleet.ingest(NodeSample(node=node, source="test", taken_at=now, engine=EngineSample(
                generation_tokens_total=tokens, requests_running=10,
                latency_buckets={"ttft": tuple(zip(BOUNDS, buckets, strict=True))} if read else None,
            )))
        snap = monitor.tick(now)
    assert snap is not None
    return snap


def test_the_stretch_share_and_cost_from_the_counts_at_its_edges_by_hand() -> None:
    snap = run(b_latency_every=3, b_latency_from=1)
    s = snap.session
    # the stretch starts once every engine had been read whole: b's buckets, at reading 1
    assert s.usd_per_million_span == "watched"
    assert s.tokens_since == dt.datetime.fromtimestamp(T0 + 1, dt.UTC).isoformat()
    assert s.tokens_until == dt.datetime.fromtimestamp(T0 + 10, dt.UTC).isoformat()
    # by hand over readings 1 → 10: a counts 4 readings of (5, 8, 9, 10) to reading 5, then
    # restarts (its 5/8/9/10 counted from zero) and 4 more; b 9 readings of 10 within 0.1 s
    a = (4 * 5 + 5 + 4 * 5, 4 * 8 + 8 + 4 * 8, 4 * 9 + 9 + 4 * 9, 4 * 10 + 10 + 4 * 10)
    b = (90, 90, 90, 90)
    within_025, within_05, total = a[1] + b[1], a[2] + b[2], a[3] + b[3]
    assert (within_025, within_05, total) == (162, 171, 180)
    # the target 0.3 s lies inside the 0.25–0.5 s bucket: between, never a point inside
    assert s.span_goodput_share_low == pytest.approx(within_025 / total)  # 0.90
    assert s.span_goodput_share_high == pytest.approx(within_05 / total)  # 0.95
    assert s.span_goodput_note is not None and "250 ms–500 ms" in s.span_goodput_note
    # the same tokens and spend as the session's $/1M: 400 + 100 + 400 (a), 900 (b)
    assert s.accepted_tokens == pytest.approx(1800.0)
    assert s.span_spend_usd is not None and s.usd_per_million_output_tokens is not None
    assert s.usd_per_million_output_tokens == pytest.approx(s.span_spend_usd / 1800.0 * 1e6)
    assert s.span_usd_per_million_good_tokens_low == pytest.approx(s.span_spend_usd / (1800.0 * 0.95) * 1e6)
    assert s.span_usd_per_million_good_tokens_high == pytest.approx(s.span_spend_usd / (1800.0 * 0.90) * 1e6)
    # said on screen as the $/1M line says its stretch, and in the report
    cheap, dear = s.span_usd_per_million_good_tokens_low, s.span_usd_per_million_good_tokens_high
    line = stretch_goodput_line(s, stretch_words(s))
    assert line is not None and line.plain.startswith(
        f"session within SLO 90.0–95.0 % over the last 9 s watched  $/1M good tok ${cheap:,.3f}–${dear:,.3f}")
    report = dict(_money_lines(s, None))
    assert report["within the SLO targets (over the same stretch)"] == "90.0%–95.0%"
    assert report["$ per 1M good output tokens (over the same stretch)"] == f"${cheap:,.4f}–${dear:,.4f}"
    assert report["token figures cover"].startswith("over the last 9 s watched")


def test_buckets_first_read_long_after_the_stretch_began_are_unknown_not_guessed() -> None:
    # b's buckets first come 70 s after its counters: its counts at the stretch's start are
    # not known, and the stretch does not wait for them (the $/1M keeps its stretch)
    snap = run(b_latency_every=1, b_latency_from=7, step_s=10.0)
    s = snap.session
    assert s.tokens_since == dt.datetime.fromtimestamp(T0, dt.UTC).isoformat()
    assert s.span_goodput_share_low is None and s.span_goodput_share_high is None
    assert s.span_usd_per_million_good_tokens_low is None
    assert s.span_goodput_note is not None and "b's TTFT buckets were first read after the stretch began" \
        in s.span_goodput_note
    assert s.usd_per_million_output_tokens is not None  # the plain figure stands
    line = stretch_goodput_line(s, stretch_words(s))
    assert line is not None and line.plain.startswith("session within SLO — over the last")
    assert "unknown: b's TTFT buckets" in dict(_money_lines(s, None))["within the SLO targets (over the same stretch)"]
