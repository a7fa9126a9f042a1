"""The acceptance-drop verdict (issue 43): a node's or a rank's draft acceptance well below
its pool's (same drafting) or its own last hour's, held for the hold time, priced as the
decode capacity it loses. Samples go through `Fleet.ingest`, ticks through `Monitor.tick`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from infertop.collectors.sample import EngineRankSample, EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.conditions import ACCEPTANCE_DROP
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import NodeView, Snapshot

T0 = 1_800_000_000.0
NODE_USD_PER_H = 80.0
DRAFTS_PER_S = 100.0  # per engine


def layout(nodes: int, interval_s: float = 1.0, extra: str = "") -> str:
    listed = "".join(f'[[nodes]]\nname = "d{i}"\nrole = "decode"\n' for i in range(1, nodes + 1))
    return f"""
[cluster]
interval_s = {interval_s}
window_s = 10
[pricing]
node_hour_usd = {NODE_USD_PER_H}
[thresholds]
hold_s = 10
{extra}
{listed}"""


@dataclass
class Engine:
    """One engine's counters, integrated second by second at acceptance `acceptance(t)`."""

    k: int = 3
    drafts: float = 0.0
    accepted: float = 0.0
    generated: float = 0.0
    steps: float = 0.0
    per_pos: list[float] = field(default_factory=list)

    def advance(self, a: float, dt: float) -> None:
        if not self.per_pos:
            self.per_pos = [0.0] * self.k
        drafts = DRAFTS_PER_S * dt
        accepted = drafts * self.k * a
        self.drafts += drafts
        self.accepted += accepted
        self.generated += drafts + accepted
        self.steps += 50.0 * dt
        weights = [a ** (i + 1) for i in range(self.k)]
        for i, w in enumerate(weights):
            self.per_pos[i] += accepted * w / sum(weights)

    def sample(self) -> EngineSample:
        return EngineSample(
            steps_total=self.steps, drafts_total=self.drafts, draft_tokens_total=self.drafts * self.k,
            accepted_tokens_total=self.accepted, generation_tokens_total=self.generated,
            accepted_tokens_by_position_total=tuple(self.per_pos or [0.0] * self.k),
            requests_running=8.0,
        )


Acceptance = Callable[[float], float]


def run(monitor: Monitor, acceptance: dict[str, list[Acceptance]], until_s: float, interval_s: float = 1.0,
        k: dict[str, int] | None = None, watch: Callable[[float, Snapshot], None] | None = None) -> Snapshot:
    """Ticks from T0 to T0 + until_s; `acceptance[node]`: one function of t per engine (rank)."""
    engines = {n: [Engine(k=(k or {}).get(n, 3)) for _ in fs] for n, fs in acceptance.items()}
    snapshot = None
    steps = round(until_s / interval_s)
    for step in range(steps + 1):
        t = step * interval_s
        for name, fs in acceptance.items():
            for engine, f in zip(engines[name], fs, strict=True):
                engine.advance(f(t), interval_s if step else 0.0)
            ranks = None
            if len(fs) > 1:
                ranks = [EngineRankSample(key=f"engine={i}", dp_rank=i, engine=e.sample())
                         for i, e in enumerate(engines[name])]
            total = engines[name][0].sample() if len(fs) == 1 else _summed(engines[name], ranks)
            monitor.fleet.ingest(NodeSample(node=name, source="scrape", taken_at=T0 + t, engine=total))
        snapshot = monitor.tick(T0 + t)
        if watch is not None:
            watch(t, snapshot)
    assert snapshot is not None
    return snapshot


def _summed(engines: list[Engine], ranks: list[EngineRankSample] | None) -> EngineSample:
    parts = [e.sample() for e in engines]
    fields = ("steps_total", "drafts_total", "draft_tokens_total", "accepted_tokens_total",
              "generation_tokens_total", "requests_running")
    values = {f: sum(getattr(p, f) for p in parts) for f in fields}
    positions = tuple(sum(p.accepted_tokens_by_position_total[i] for p in parts)  # type: ignore[index]
                      for i in range(engines[0].k))
    return EngineSample(**values, accepted_tokens_by_position_total=positions, ranks=ranks)


def wander(phase: float, period_s: float = 97.0) -> Acceptance:
    """0.8 ± 5 %: a healthy drafter's acceptance moving with its traffic."""
    return lambda t: 0.8 * (1 + 0.05 * math.sin(2 * math.pi * t / period_s + phase))


def drops(node: NodeView) -> list[str]:
    return [v.detail for v in node.verdicts if v.kind == ACCEPTANCE_DROP]


def nodes(snapshot: Snapshot) -> dict[str, NodeView]:
    return {n.name: n for n in snapshot.nodes}


def test_a_collapse_on_one_node_is_flagged_within_hold_plus_one_window_and_priced() -> None:
    collapse_at = 120.0
    monitor = Monitor(parse_layout(layout(4)), sources=[], clock=lambda: T0)
    acceptance = {f"d{i}": [wander(i)] for i in (1, 2, 4)}
    acceptance["d3"] = [lambda t: 0.8 if t < collapse_at else 0.4]
    flagged: dict[str, float] = {}

    def watch(t: float, snap: Snapshot) -> None:
        for n in snap.nodes:
            if drops(n):
                flagged.setdefault(n.name, t)

    last = run(monitor, acceptance, 200.0, watch=watch)
    # hold_s (10) + window_s (10), and the tick that sees it
    assert set(flagged) == {"d3"}
    assert collapse_at < flagged["d3"] <= collapse_at + 10 + 10 + 1
    d3 = nodes(last)["d3"]
    [verdict] = [v for v in d3.verdicts if v.kind == ACCEPTANCE_DROP]
    e = d3.engine
    assert e is not None and e.draft_acceptance == pytest.approx(0.4)
    peers = sorted(n.engine.draft_acceptance for n in last.nodes if n.name != "d3" and n.engine)  # type: ignore[misc]
    pool = peers[1]  # the median of the three others
    assert f"draft acceptance 40 % vs pool median {pool * 100:.0f} % (3 other nodes, drafting method " \
           "not served, 3 draft tokens)" in verdict.detail
    # by hand: 300 draft tokens/s at 0.4 make 100 + 120 = 220 tokens/s; at the pool's, 220 + 300 × (pool − 0.4)
    at_pool = 220.0 + 300.0 * (pool - 0.4)
    assert e.accepted_tokens_per_s == pytest.approx(220.0)
    assert f"it would make {at_pool:,.0f} decode tokens/s, not 220" in verdict.detail
    assert verdict.usd_per_hour_at_stake == pytest.approx(NODE_USD_PER_H * (at_pool - 220.0) / at_pool)
    assert f"${NODE_USD_PER_H * (at_pool - 220.0) / at_pool:,.2f}/h of its $80.00/h lost" in verdict.detail
    # its evidence: the figure against the pool, per position, and acceptance over time
    rows = {r.figure: r for r in verdict.evidence}
    assert rows["draft acceptance"].value == pytest.approx(40.0)
    assert rows["draft acceptance"].median == pytest.approx(pool * 100)
    assert rows["accepted at draft position 1"].value is not None
    assert verdict.trend is not None and verdict.trend.figure == "draft acceptance"
    values = [p.value for p in verdict.trend.points]
    assert values[0] == pytest.approx(0.8) and values[-1] == pytest.approx(0.4)
    assert verdict.trend.reference == pytest.approx(pool)
    # the JSON carries it, times as ISO 8601
    data = last.to_json_dict()
    node = next(n for n in data["nodes"] if n["name"] == "d3")  # type: ignore[union-attr,index]
    trend = next(v for v in node["verdicts"] if v["kind"] == ACCEPTANCE_DROP)["trend"]  # type: ignore[index]
    assert isinstance(trend["points"][0]["at"], str)


def test_the_node_recovers_and_the_verdict_clears() -> None:
    monitor = Monitor(parse_layout(layout(3)), sources=[], clock=lambda: T0)
    acceptance = {"d1": [wander(0)], "d2": [wander(2)], "d3": [lambda t: 0.3 if 60 <= t < 120 else 0.8]}
    seen: list[tuple[float, bool]] = []
    run(monitor, acceptance, 180.0, watch=lambda t, s: seen.append((t, bool(drops(nodes(s)["d3"])))))
    on = [t for t, flagged in seen if flagged]
    assert on and 60 < on[0] <= 81 and on[-1] < 120 + 10 + 10 + 1
    assert not seen[-1][1]


def test_a_healthy_pool_wandering_five_percent_is_never_flagged_over_two_hours() -> None:
    monitor = Monitor(parse_layout(layout(4, interval_s=5.0)), sources=[], clock=lambda: T0)
    acceptance = {f"d{i}": [wander(1.7 * i, period_s=300.0 + 170.0 * i)] for i in range(1, 5)}
    flagged: set[str] = set()

    def watch(t: float, snap: Snapshot) -> None:
        flagged.update(n.name for n in snap.nodes if drops(n))

    run(monitor, acceptance, 2 * 3600.0, interval_s=5.0, watch=watch)
    assert flagged == set()


def test_alone_in_its_pool_a_node_is_held_against_its_own_last_hour() -> None:
    monitor = Monitor(parse_layout(layout(1, interval_s=5.0)), sources=[], clock=lambda: T0)
    last = run(monitor, {"d1": [lambda t: 0.8 if t < 900 else 0.5]}, 960.0, interval_s=5.0)
    [detail] = drops(nodes(last)["d1"])
    assert "draft acceptance 50 % vs no pool to compare" in detail
    assert "its own last hour 80 %" in detail
    assert "at its own usual acceptance it would make" in detail


def test_too_little_history_of_its_own_and_no_pool_judges_nothing() -> None:
    monitor = Monitor(parse_layout(layout(1)), sources=[], clock=lambda: T0)
    last = run(monitor, {"d1": [lambda t: 0.8 if t < 60 else 0.3]}, 120.0)
    assert drops(nodes(last)["d1"]) == []


def test_different_drafting_is_not_pooled() -> None:
    """MTP with 1 draft token accepts more than with 3: a node drafting 1 is no peer."""
    monitor = Monitor(parse_layout(layout(4)), sources=[], clock=lambda: T0)
    acceptance = {"d1": [wander(0)], "d2": [wander(1)], "d3": [wander(2)], "d4": [lambda t: 0.5]}
    last = run(monitor, acceptance, 60.0, k={"d4": 1})
    assert all(drops(n) == [] for n in last.nodes)


def test_one_rank_below_the_pool_is_named_and_priced_at_its_share_of_the_node() -> None:
    monitor = Monitor(parse_layout(layout(3)), sources=[], clock=lambda: T0)
    healthy = [wander(0), wander(1), wander(2), wander(3)]
    acceptance = {"d1": healthy, "d2": healthy,
                  "d3": [wander(0), wander(1), wander(2), lambda t: 0.8 if t < 30 else 0.2]}
    last = run(monitor, acceptance, 80.0)
    assert drops(nodes(last)["d1"]) == [] and drops(nodes(last)["d2"]) == []
    [verdict] = [v for v in nodes(last)["d3"].verdicts if v.kind == ACCEPTANCE_DROP]
    assert verdict.detail.startswith("d3 engine 3: draft acceptance 20 % vs pool median")
    # the rank's own stake: 1 of 4 engines, no GPU map: the node's price (share unknown → whole)
    assert verdict.usd_per_hour_at_stake is not None and 0 < verdict.usd_per_hour_at_stake < NODE_USD_PER_H


def test_a_node_whose_ranks_fell_together_names_no_rank_and_one_apart_is_named() -> None:
    monitor = Monitor(parse_layout(layout(3)), sources=[], clock=lambda: T0)
    healthy = [wander(0), wander(1), wander(2), wander(3)]
    together = [lambda t: 0.3, lambda t: 0.31, lambda t: 0.3, lambda t: 0.32]
    last = run(monitor, {"d1": healthy, "d2": healthy, "d3": together}, 40.0)
    [detail] = drops(nodes(last)["d3"])
    assert "lowest rank" not in detail
    monitor = Monitor(parse_layout(layout(3)), sources=[], clock=lambda: T0)
    apart = [lambda t: 0.3, lambda t: 0.3, lambda t: 0.3, lambda t: 0.05]
    last = run(monitor, {"d1": healthy, "d2": healthy, "d3": apart}, 40.0)
    [detail] = drops(nodes(last)["d3"])
    assert "; lowest rank d3 engine 3 5 %" in detail
