"""The reservation's edges (issue 45): a start still to come bills nothing, a past end
stops the bill (unless the layout says the hardware is billed on) and the projection is
the reservation's length × $/h, and a budget of $0 is a budget."""

from __future__ import annotations

import datetime as dt

import pytest

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.format import reservation_words, stretch_words
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import SessionView

H = 3600.0
NOW = dt.datetime(2026, 11, 28, 16, 28, tzinfo=dt.UTC).timestamp()
RATE = 64 * 10.582  # $677.248/h, the why-slow cluster


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def layout(session: str) -> str:
    nodes = "".join(f'[[nodes]]\nname = "n{i}"\ngpus = 8\n' for i in range(8))
    return f"[session]\n{session}\n[pricing]\ngpu_hour_usd = 10.582\n{nodes}"


def watch(session: str, seconds: int = 6, born: float | None = None) -> SessionView:
    """The monitor over `seconds` at 1 s, each engine making 1,000 tokens/s."""
    monitor = Monitor(parse_layout(layout(session)), sources=[], clock=lambda: NOW)
    s = None
    for k in range(seconds + 1):
        for i in range(8):
            gen = 5e9 + 1000.0 * k
            monitor.fleet.ingest(NodeSample(node=f"n{i}", source="scrape", taken_at=NOW + k, engine=EngineSample(
                generation_tokens_total=gen, requests_finished_total=gen / 100, counters_started_at=born)))
        s = monitor.tick(NOW + k).session
    assert s is not None
    return s


def test_a_start_still_to_come_bills_nothing() -> None:
    start = NOW + 23 * H
    s = watch(f'reservation_start = "{iso(start)}"', born=NOW - 86_400.0)
    assert s.spend_usd in (0.0, None) and s.elapsed_s == 0.0
    assert s.reservation_starts_in_s == pytest.approx(23 * H - 6)
    assert s.usd_per_million_output_tokens is None and s.accepted_tokens is None
    assert stretch_words(s) == "reservation starts in 23 h: nothing billed yet"
    assert (reservation_words(s) or "").startswith("reservation starts in 23 h")


def test_a_past_end_stops_the_bill_and_the_projection_is_its_length() -> None:
    start, end = NOW - 68 * 60, NOW - 28 * 60  # 15:20 to 16:00, run at 16:28
    s = watch(f'reservation_start = "{iso(start)}"\nreservation_end = "{iso(end)}"\nbudget_usd = 1000')
    full = RATE * 40 / 60  # $451.50
    assert full == pytest.approx(451.4987, abs=1e-3)
    assert s.spend_usd == pytest.approx(full, abs=1e-6)
    assert s.projected_spend_usd == pytest.approx(full, abs=1e-6)
    assert s.reservation_ended is True and s.billed_after_end is False and s.budget_holds is True
    assert "ended" in (reservation_words(s) or "") and "nothing billed after it" in (reservation_words(s) or "")
    # no tokens after the end are set against a bill that stopped: none are counted
    assert s.usd_per_million_output_tokens is None


def test_billed_after_end_is_the_layouts_to_say() -> None:
    start, end = NOW - 68 * 60, NOW - 28 * 60
    s = watch(f'reservation_start = "{iso(start)}"\nreservation_end = "{iso(end)}"\nbilled_after_end = true')
    assert s.spend_usd == pytest.approx(RATE * (68 * 60 + 6) / H, abs=1e-6)
    assert s.projected_spend_usd == pytest.approx(RATE * 40 / 60, abs=1e-6)
    assert s.reservation_ended is True and s.billed_after_end is True
    assert "billed on after it" in (reservation_words(s) or "")
    # tokens over the stretch still billed: the watched seconds, within 1 %
    assert s.usd_per_million_output_tokens == pytest.approx(RATE / (8000 * H) * 1e6, rel=0.01)


def test_a_zero_budget_is_a_budget() -> None:
    s = watch(f'reservation_start = "{iso(NOW - 60)}"\nbudget_usd = 0')
    assert s.spend_usd is not None and s.spend_usd > 0
    assert s.budget_over_by_usd == pytest.approx(s.spend_usd)
    assert (s.budget_label or "").startswith("over by $") and s.budget_label.endswith("of $0")
    assert s.budget_used_fraction == 1.0 and s.budget_alert == "100%"
    assert s.budget_holds is None  # no end: nothing projected


def test_the_report_says_the_edges_not_a_false_claim() -> None:
    """A start still to come: the report's money table says so, not "the engines' counters
    began within it" (they began a day before it); a past end: it says the bill stopped."""
    from infertop.monitor.record.report import _money_lines

    ahead = dict(_money_lines(watch(f'reservation_start = "{iso(NOW + 23 * H)}"', born=NOW - 86_400.0), None))
    assert ahead["token figures cover"] == "reservation starts in 23 h: nothing billed yet"
    assert ahead["reservation"].startswith("reservation starts in 23 h")
    assert "began within it" not in " ".join(ahead.values())
    ended = dict(_money_lines(watch(
        f'reservation_start = "{iso(NOW - 68 * 60)}"\nreservation_end = "{iso(NOW - 28 * 60)}"'), None))
    assert "ended at 2026-11-28 16:00 UTC: nothing billed after it" in ended["reservation"]
    assert ended["projected spend at the reservation end"] == "$451.50"
