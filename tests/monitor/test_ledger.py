"""The session ledger: spend from the reservation start, phases, idle spend, tokens from
counter increases, the API-equivalent, and continuing after a restart."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.counter_tally import CounterTally, TokenDeltas
from infertop.monitor.evaluation.ledger import SessionLedger, TickFigures
from infertop.monitor.monitor import Monitor

EPS = 1e-9
H = 3600.0
SATURDAY = dt.datetime(2026, 11, 28, tzinfo=dt.UTC).timestamp()


def engine_sample(node: str, at: float, gen: float | None, prompt: float | None = None,
                  cached: float | None = None, finished: float | None = None,
                  source: str = "scrape") -> NodeSample:
    return NodeSample(
        node=node, source=source, taken_at=at,
        engine=EngineSample(
            generation_tokens_total=gen, prompt_tokens_total=prompt,
            prompt_cached_tokens_total=cached, requests_finished_total=finished,
        ),
    )


def test_deepinfer_example_tick_by_tick() -> None:
    ledger = SessionLedger(started_at=0.0, budget_usd=600.0, acceptable_tasks=1000)
    for second in range(1, 3 * 3600 + 1):
        ledger.advance(TickFigures(now=float(second), cost_per_hour_usd=200.0))
    view = ledger.view(3 * H)
    assert view.spend_usd == pytest.approx(600.0, abs=EPS)
    assert view.usd_per_acceptable_task == pytest.approx(0.60, abs=EPS)
    assert view.budget_used_fraction == pytest.approx(1.0, abs=EPS)
    assert view.budget_alert == "100%"
    assert view.elapsed_s == 3 * H


def test_first_tick_charges_since_reservation_start() -> None:
    ledger = SessionLedger(started_at=1000.0)
    ledger.advance(TickFigures(now=1000.0 + 1800, cost_per_hour_usd=100.0, idle_fraction=1.0))
    # the half hour before infertop looked is billed, but not counted as idle (unknown)
    assert ledger.spend_usd == pytest.approx(50.0, abs=EPS)
    assert ledger.idle_spend_usd == 0.0
    assert ledger.unwatched_s == 1800
    ledger.advance(TickFigures(now=1000.0 + 3600, cost_per_hour_usd=100.0, idle_fraction=0.25))
    assert ledger.spend_usd == pytest.approx(100.0, abs=EPS)
    assert ledger.idle_spend_usd == pytest.approx(12.5, abs=EPS)  # 0.25 × $50


def test_phases_split_at_the_mark() -> None:
    ledger = SessionLedger(started_at=0.0, phase="build")
    ledger.advance(TickFigures(now=0.0, cost_per_hour_usd=360.0))
    ledger.mark_phase("load", 1000.0)
    ledger.mark_phase("run", 2500.0)
    ledger.advance(TickFigures(now=2000.0, cost_per_hour_usd=360.0))  # build 1000 s, load 1000 s
    ledger.advance(TickFigures(now=3600.0, cost_per_hour_usd=360.0))  # load 500 s, run 1100 s
    spend = ledger.spend_by_phase
    assert spend["build"] == pytest.approx(100.0, abs=EPS)
    assert spend["load"] == pytest.approx(150.0, abs=EPS)
    assert spend["run"] == pytest.approx(110.0, abs=EPS)
    assert sum(spend.values()) == pytest.approx(ledger.spend_usd, abs=EPS)
    assert ledger.seconds_by_phase == pytest.approx({"build": 1000, "load": 1500, "run": 1100})
    assert ledger.phase == "run"
    with pytest.raises(ValueError, match="unknown phase"):
        ledger.mark_phase("lunch", 4000.0)


def test_the_phase_says_how_long_it_has_run_not_the_session() -> None:
    # a newcomer's trial: marked "failed" two hours in, the panel said "phase failed for
    # 2h02m" (the session's length) beside "failed $5.57 (0m02s)"
    ledger = SessionLedger(started_at=0.0)
    ledger.advance(TickFigures(now=7200.0, cost_per_hour_usd=360.0))
    assert ledger.view(7200.0).phase_elapsed_s == 7200.0  # "run" since the session began
    ledger.mark_phase("failed", 7210.0)
    ledger.advance(TickFigures(now=7205.0, cost_per_hour_usd=360.0))
    assert ledger.view(7205.0).phase == "run" and ledger.view(7205.0).phase_elapsed_s == 7205.0
    ledger.advance(TickFigures(now=7240.0, cost_per_hour_usd=360.0))  # the mark now in force
    view = ledger.view(7240.0)
    assert view.phase == "failed" and view.phase_elapsed_s == 30.0 and view.elapsed_s == 7240.0
    back = SessionLedger.from_state(json.loads(json.dumps(ledger.to_state())))  # after a restart
    assert back.view(7300.0).phase_elapsed_s == 90.0


def test_tally_counts_increases_and_resets() -> None:
    tally = CounterTally()
    for at, gen in [(0, 100), (1, 250), (2, 40), (3, 90)]:  # engine restarted between 1 and 2
        tally.observe(engine_sample("d1", at, gen))
    deltas = tally.drain()
    assert deltas.output_tokens == 150 + 40 + 50
    assert tally.drain().output_tokens is None  # nothing new since
    # unknown breaks nothing, error samples are ignored
    tally.observe(engine_sample("d1", 4, None))
    tally.observe(NodeSample(node="d1", source="scrape", taken_at=5, error="down"))
    tally.observe(engine_sample("d1", 6, 100))
    assert tally.drain().output_tokens == 10


def test_tally_one_source_per_node_and_cache_split() -> None:
    tally = CounterTally()
    # d1: exposes the prefix-cache counter; d2: two sources, no cache counter
    tally.observe(engine_sample("d1", 0, 0, prompt=0, cached=0))
    tally.observe(engine_sample("d1", 1, 10, prompt=1000, cached=400))
    tally.observe(engine_sample("d2", 0, 0, prompt=0, source="log"))
    tally.observe(engine_sample("d2", 0, 500, prompt=0, source="scrape"))
    tally.observe(engine_sample("d2", 1, 20, prompt=200, source="log"))
    tally.observe(engine_sample("d2", 2, 530, prompt=300, source="scrape"))
    deltas = tally.drain()
    assert deltas.output_tokens == 10 + 30  # d2 counted from scrape (heard last), not both
    assert deltas.prompt_tokens == 1000 + 300
    assert deltas.prompt_cached_tokens == 400
    assert deltas.prompt_tokens_without_cache_figure == 300


def test_tokens_api_equivalent_and_per_unit_figures() -> None:
    ledger = SessionLedger(started_at=SATURDAY, budget_usd=1000.0)
    # the engine's counters read at the reservation start and an hour later
    ledger.tally.observe(engine_sample("d1", SATURDAY, 0.0, 0.0, 0.0, 0.0))
    ledger.advance(TickFigures(now=SATURDAY, cost_per_hour_usd=120.0, deltas=ledger.tally.drain()))
    ledger.tally.observe(engine_sample("d1", SATURDAY + H, 2e6, 1e6, 5e5, 400.0))
    deltas = ledger.tally.drain()
    assert (deltas.output_tokens, deltas.prompt_tokens, deltas.prompt_cached_tokens,
            deltas.requests_finished) == (2e6, 1e6, 5e5, 400)
    ledger.advance(TickFigures(now=SATURDAY + H, cost_per_hour_usd=120.0, deltas=deltas))
    view = ledger.view(SATURDAY + H)
    assert view.usd_per_million_span == "reservation" and view.span_s == H
    assert view.spend_usd == pytest.approx(120.0, abs=EPS)
    assert view.accepted_tokens == 2e6
    assert view.usd_per_million_output_tokens == pytest.approx(60.0, abs=EPS)
    assert view.usd_per_request == pytest.approx(0.3, abs=EPS)
    # off-peak Saturday: 2 × $0.60 + 0.5 × $0.003 + 0.5 × $0.15
    api = 1.2 + 0.0015 + 0.075
    assert view.api_equivalent_usd == pytest.approx(api, abs=EPS)
    assert view.api_break_even_ratio == pytest.approx(120.0 / api, abs=1e-9)
    assert view.api_cache_note == "prompt tokens split by the engine's prefix-cache counter"
    assert view.budget_exhausted_in_s == pytest.approx(880.0 / 120.0 * H, abs=1e-6)
    assert "DeepSeek-V4.1-Flash" in (view.api_prices or "")


def test_unknown_stays_unknown() -> None:
    ledger = SessionLedger(started_at=0.0)
    ledger.advance(TickFigures(now=10.0, cost_per_hour_usd=None))
    view = ledger.view(10.0)
    assert view.spend_usd is None and view.idle_spend_usd is None
    assert view.accepted_tokens is None and view.api_equivalent_usd is None
    assert view.usd_per_million_output_tokens is None and view.budget_used_fraction is None


def test_cache_note_when_no_counter() -> None:
    ledger = SessionLedger(started_at=0.0)
    ledger.advance(TickFigures(now=0.0, cost_per_hour_usd=1.0))
    deltas = TokenDeltas(output_tokens=1.0, prompt_tokens=100.0, prompt_cached_tokens=None,
                         prompt_tokens_without_cache_figure=100.0)
    ledger.advance(TickFigures(now=1.0, cost_per_hour_usd=1.0, deltas=deltas))
    assert "billed as cache misses" in (ledger.cache_note() or "")


def test_state_round_trip_continues_the_ledger() -> None:
    ledger = SessionLedger(started_at=0.0, budget_usd=50.0)
    ledger.tally.observe(engine_sample("d1", 0, 100))
    ledger.advance(TickFigures(now=60.0, cost_per_hour_usd=36.0, node_cost_per_hour_usd={"d1": 30.0}))
    ledger.mark_phase("warmup", 90.0)
    ledger.tally.observe(engine_sample("d1", 100, 400))
    ledger.advance(TickFigures(now=120.0, cost_per_hour_usd=36.0, idle_fraction=0.5,
                               node_cost_per_hour_usd={"d1": 30.0}, deltas=ledger.tally.drain()))
    state = json.loads(json.dumps(ledger.to_state()))  # what the record stores
    restored = SessionLedger.from_state(state)
    assert restored.view(120.0) == ledger.view(120.0)
    assert {k: float(v) for k, v in restored.spend_by_node.items()} == pytest.approx(
        {"d1": 1.0, "(cluster)": 0.2}
    )
    # the engine kept counting while infertop was down: the gap's tokens are not lost
    restored.resumed = True
    restored.tally.observe(engine_sample("d1", 500, 1000))
    restored.advance(TickFigures(now=600.0, cost_per_hour_usd=36.0, idle_fraction=1.0,
                                 deltas=restored.tally.drain()))
    assert restored.output_tokens == 300 + 600
    assert restored.spend_usd == pytest.approx(36.0 * 600 / H, abs=EPS)
    assert restored.idle_spend_usd == pytest.approx(ledger.idle_spend_usd, abs=EPS)  # gap unknown
    with pytest.raises(ValueError, match="version"):
        SessionLedger.from_state({"version": 99})
    with pytest.raises(ValueError, match="malformed"):
        SessionLedger.from_state({"version": 1, "started_at": 0.0})


LAYOUT = """
[cluster]
name = "t"
interval_s = 1.0
window_s = 5.0
[session]
reservation_start = "2026-11-28T00:00:00Z"
budget_usd = 100
[pricing]
gpu_hour_usd = 3.0
extras_hour_usd = 6.0
[[nodes]]
name = "d1"
role = "decode"
gpus = 2
[[nodes]]
name = "d2"
role = "decode"
gpus = 2
"""


def node_sample(node: str, at: float, util: float, gen: float) -> NodeSample:
    return NodeSample(
        node=node, source="scrape", taken_at=at,
        gpus=[GpuSample(index=i, util_pct=util) for i in range(2)],
        engine=EngineSample(generation_tokens_total=gen, prompt_tokens_total=gen * 2),
    )


def test_monitor_feeds_the_ledger() -> None:
    layout = parse_layout(LAYOUT)
    t0 = SATURDAY + H
    monitor = Monitor(layout, sources=[], clock=lambda: t0)
    emit = monitor.fleet.ingest  # the path every source's samples take
    for step in range(4):
        emit(node_sample("d1", t0 + step, 90.0, 1000.0 * step))
        emit(node_sample("d2", t0 + step, 0.0, 0.0))
        snap = monitor.tick(t0 + step)
    s = snap.session
    # reservation start Saturday 00:00, last tick 01:00:03 at $18/h (2 × 2 × $3 + $6)
    assert s.cost_per_hour_usd == pytest.approx(18.0)
    assert s.spend_usd == pytest.approx(18.0 * (H + 3) / H, abs=EPS)
    assert s.accepted_tokens == 3000.0
    assert s.prompt_tokens == 6000.0
    assert s.api_equivalent_usd == pytest.approx(3000 * 0.6e-6 + 6000 * 0.15e-6, abs=EPS)
    assert "billed as cache misses" in (s.api_cache_note or "")
    # d2 idle, d1 busy, both $6/h: half the node bill sits idle; the $6/h of extras is
    # neither idle nor busy, so idle spend runs at d2's own $6/h, not half of $18/h
    assert s.idle_fraction == pytest.approx(0.5)
    assert s.idle_cost_per_hour_usd == pytest.approx(6.0)
    assert s.extras_cost_per_hour_usd == pytest.approx(6.0)
    assert s.idle_spend_usd == pytest.approx(6.0 * 3 / H, abs=EPS)
    monitor.mark_phase("failed", t0 + 3.5)
    snap = monitor.tick(t0 + 4)
    assert snap.session.phase == "failed"
    assert snap.to_json_dict()["session"]["spend_usd"] == pytest.approx(18.0 * (H + 4) / H)


def test_non_finite_figures_do_not_poison_the_sum() -> None:
    ledger = SessionLedger(started_at=0.0)
    ledger.advance(TickFigures(now=10.0, cost_per_hour_usd=36.0))
    ledger.advance(TickFigures(now=20.0, cost_per_hour_usd=float("nan"), idle_fraction=float("inf")))
    ledger.advance(TickFigures(now=30.0, cost_per_hour_usd=36.0, idle_fraction=float("nan")))
    assert ledger.view(30.0).spend_usd == pytest.approx(0.2, abs=EPS)  # the NaN stretch is unknown
    assert ledger.idle_spend_usd == 0


def test_nodes_that_never_answer_are_billed() -> None:
    """Reserved GPUs are billed whether or not their node answers: two 8-GPU nodes at
    $10.582 that never answered for 2 h cost $338.62 (the layout must give `gpus`)."""
    layout = parse_layout(
        '[session]\nreservation_start = "2026-11-28T00:00:00Z"\n[pricing]\ngpu_hour_usd = 10.582\n'
        '[[nodes]]\nname = "d1"\ngpus = 8\n[[nodes]]\nname = "d2"\ngpus = 8\n'
    )
    monitor = Monitor(layout, sources=[], clock=lambda: SATURDAY)
    snap = monitor.tick(SATURDAY + 2 * H)
    assert snap.session.spend_usd == pytest.approx(338.624, abs=EPS)
    assert all(n.gpus == [] for n in snap.nodes)  # never heard from


def test_idle_spend_weighs_the_idle_nodes_own_price() -> None:
    """One idle node of three at $84.656/h each, $12.50/h of extras: idle runs at
    $84.66/h, not a third of the whole $266.47/h ($88.82/h)."""
    layout = parse_layout(
        '[session]\nreservation_start = "2026-11-28T00:00:00Z"\n'
        '[pricing]\ngpu_hour_usd = 10.582\nextras_hour_usd = 12.5\n'
        + "".join(f'[[nodes]]\nname = "d{i}"\ngpus = 8\n' for i in (1, 2, 3))
    )
    t0 = SATURDAY + H
    monitor = Monitor(layout, sources=[], clock=lambda: t0)
    for step in range(4):
        for i, util in ((1, 90.0), (2, 80.0), (3, 0.0)):
            monitor.fleet.ingest(NodeSample(
                node=f"d{i}", source="scrape", taken_at=t0 + step,
                gpus=[GpuSample(index=g, util_pct=util) for g in range(8)],
            ))
        s = monitor.tick(t0 + step).session
    assert s.cost_per_hour_usd == pytest.approx(3 * 84.656 + 12.5)
    assert s.idle_cost_per_hour_usd == pytest.approx(84.656)
    assert s.extras_cost_per_hour_usd == pytest.approx(12.5)
    assert s.idle_spend_usd == pytest.approx(84.656 * 3 / H, abs=EPS)
