"""Whose per-GPU detail the prom source reads a tick: the one rule (collectors/sources/prom_detail.py)."""

from __future__ import annotations

import pytest

from infertop.collectors.sources import promql
from infertop.collectors.sources.prom_detail import plan_detail
from infertop.monitor.format import detail_forms, fit_forms

FLEET = [f"n{i:04d}" for i in range(1250)]


@pytest.mark.parametrize(
    ("nodes", "interval_s", "wanted", "count", "every_s"),
    [
        (8, 2.0, (), 8, None),  # a small fleet: everything every tick, as before
        (64, 2.0, (), 64, None),
        (65, 2.0, (), 5, 30.0),  # 15 slices of 5
        (128, 1.0, (), 5, 30.0),  # 30 slices of 5 (the last one short)
        (1250, 2.0, (), 84, 30.0),  # 15 slices of 84
        (1250, 2.0, FLEET[1000:1040], 124, 30.0),  # + 40 in view, outside this tick's slice
        (1250, 2.0, FLEET[84:124], 84, 30.0),  # in view and in this tick's slice: counted once
        (1250, 2.0, ["not-a-node"], 84, 30.0),  # a name outside the fleet is no node
        (1250, 7.0, (), 313, 28.0),  # 4 slices: every node within 28 s
        (1250, 30.0, (), 1250, None),  # one slice: every node every tick
        (1250, 60.0, (), 1250, None),
    ],
)
def test_plan_table(nodes: int, interval_s: float, wanted: list[str], count: int, every_s: float | None) -> None:
    plan = plan_detail(FLEET[:nodes], 1, interval_s, wanted)
    assert plan.count == count
    assert plan.every_s == every_s
    assert plan.total == nodes
    if every_s is None:
        assert plan.nodes is None


@pytest.mark.parametrize("nodes", [65, 128, 1024, 1250, 4096])
@pytest.mark.parametrize("interval_s", [1.0, 2.0, 5.0, 10.0])
def test_rotation_reaches_every_node_within_the_bound(nodes: int, interval_s: float) -> None:
    fleet = [f"n{i}" for i in range(nodes)]
    last: dict[str, int] = {}
    longest = 0
    assert plan_detail(fleet, 0, interval_s).nodes is None  # the first tick reads every node
    for tick in range(1, 200):
        plan = plan_detail(fleet, tick, interval_s)
        assert plan.nodes is not None and plan.every_s is not None
        for n in plan.nodes:
            if n in last:
                longest = max(longest, tick - last[n])
            last[n] = tick
        assert plan.wanted == 0 and plan.rotation == len(plan.nodes)
    assert set(last) == set(fleet)
    assert longest * interval_s <= plan.every_s <= 30.0


def test_flagged_and_in_view_every_tick() -> None:
    wanted = {"n0007", "n1200"}
    for tick in range(1, 40):
        plan = plan_detail(FLEET, tick, 2.0, wanted)
        assert plan.nodes is not None and wanted <= plan.nodes
        assert plan.wanted == 2


def test_words() -> None:
    plan = plan_detail(FLEET, 1, 2.0, FLEET[1000:1040])
    forms = detail_forms(plan.count, plan.total, plan.every_s)
    assert forms[0] == "detail for 124 of 1,250 nodes this tick; every node within 30 s"
    assert fit_forms(forms, 50) == "detail 124 of 1,250 nodes, every node within 30 s"
    assert fit_forms(forms, 45) == "detail 124/1,250, all ≤ 30 s"
    assert fit_forms(forms, 16) == "detail 124/1,250"
    assert fit_forms(forms, 10) is None
    assert detail_forms(16, 16, None)[0] == "detail for all 16 nodes every tick"
    first = plan_detail(FLEET, 0, 2.0)
    assert detail_forms(first.count, first.total, first.every_s)[0] == (
        "detail for 1,250 of 1,250 nodes this tick; every node within 30 s")


def test_narrowed_queries() -> None:
    """The recorded series are narrowed on `infertop_node`, raw queries on the node label
    (a node's `:port` still matches), and not at all where several labels name the node."""
    builder = promql.QueryBuilder(selector='job="dcgm"')
    util = next(q for q in builder.gpu() if q.key == "util_pct")
    recorded = promql.recorded_for_nodes(promql.Query("gpu", "util_pct", "infertop_node:gpu_util_pct"),
                                         ["decode-01", "a.b"])
    assert recorded.promql == 'infertop_node:gpu_util_pct{infertop_node=~"(?:a\\\\.b|decode\\\\-01)"}'
    raw = promql.raw_for_nodes(builder, "gpu", ["decode-01"])
    assert raw is not None
    assert 'instance=~"(?:decode\\\\-01)(?::[0-9]+)?"' in raw["util_pct"].promql
    assert 'job="dcgm"' in raw["util_pct"].promql
    assert raw["util_pct"].promql != util.promql
    assert set(raw) == {q.key for q in builder.gpu()}
    assert promql.raw_for_nodes(promql.QueryBuilder(node_labels=("Hostname", "instance")), "gpu", ["x"]) is None


def test_the_source_narrows_the_detail_queries_only() -> None:
    """Per-GPU series and each engine's latency buckets are narrowed to the plan's nodes;
    the node's own engine and host figures never are (read for every node every tick)."""
    from infertop.collectors.sources import prom_rules
    from infertop.collectors.sources.prom import PromSource
    from infertop.layouts.model import PrometheusConfig

    nodes = [f"n{i:03d}" for i in range(100)]
    one_label = PromSource(PrometheusConfig(url="http://127.0.0.1:1"), nodes, 2.0)
    plan = one_label.detail_plan(1)
    assert plan.nodes is not None and len(plan.nodes) == 7  # 100 nodes in 15 slices
    for tier in ("engine", "node", "gpu"):
        whole = one_label.queries(tier)
        narrowed = one_label.queries(tier, detail=plan)
        assert [q.key for q in whole] == [q.key for q in narrowed]
        for a, b in zip(whole, narrowed, strict=True):
            detail = tier == "gpu" or promql.is_rank_latency(a)
            assert (a.promql != b.promql) == detail, a.key
            if detail:
                assert 'instance=~"(?:n007|n008|n009|n010|n011|n012|n013)(?::[0-9]+)?"' in b.promql
    # two node labels and the recorded rules: the recorded series on `infertop_node`, the
    # raw per-engine buckets by the answer (`and on` the recorded stamps)
    two = PromSource(PrometheusConfig(url="http://127.0.0.1:1", node_label=["node", "instance"]), nodes, 2.0)
    two.backends[0].recorded = {name for t in prom_rules.TIERS for name, _ in prom_rules.recording_rules(t)}
    gpu = {q.key: q.promql for q in two.queries("gpu", detail=plan)}
    assert gpu["util_pct"] == 'infertop_node:gpu_util_pct{infertop_node=~"(?:n007|n008|n009|n010|n011|n012|n013)"}'
    engine = [q for q in two.queries("engine", detail=plan) if promql.is_rank_latency(q)]
    assert engine and all(q.promql.endswith(
        ') and on (infertop_node) infertop_node:engine_timestamp{infertop_node=~"(?:n007|n008|n009|n010|n011|n012|n013)"}')
        for q in engine)
