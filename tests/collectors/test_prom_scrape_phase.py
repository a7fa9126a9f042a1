"""A node read through a metrics backend is judged from where its target sits in the
backend's scrape cycle: a healthy target whose scrape trails the round's newest by most
of an interval is not stale, and a target the backend stopped scraping still ages.

(`tests/integration/test_demo_via.py [prometheus]` once showed 3 of 16 healthy demo
nodes stale: scrape 2 s, interval 2 s, stale past 2 intervals. The round's newest
scrape, its own place in the cycle and the tick's lag added up past 4 s.)"""

from __future__ import annotations

import pytest

from infertop.collectors.fleet import FleetState
from infertop.collectors.sources import promql
from infertop.collectors.sources.prom import PromSource, backend_behind_s
from infertop.layouts.model import PrometheusConfig, Thresholds
from infertop.monitor.evaluation.figures import node_status

INTERVAL_S = 2.0
READ_AT = 1_800_000_000.0


def engine_figures(scraped_at: float) -> dict[str, dict[tuple[str, ...], float | None]]:
    return {"timestamp": {(): scraped_at}, "steps_total": {(): 4000.0}, "requests_running": {(): 12.0}}


def status_after_a_late_tick(trails_s: float, backend_delay_s: float = 0.2) -> str:
    newest = READ_AT - backend_delay_s
    grouped: dict[str, promql.Grouped] = {"engine": {
        "node-a": engine_figures(newest), "node-b": engine_figures(newest - trails_s),
    }}
    source = PromSource(PrometheusConfig(url="http://127.0.0.1:9"), ["node-a", "node-b"], INTERVAL_S)
    source.behind_s = backend_behind_s(grouped, READ_AT)
    assert source.behind_s == pytest.approx(backend_delay_s)
    state = FleetState(["node-a", "node-b"])
    for sample in source._build(grouped, {"engine"}, READ_AT, []):
        state.add(sample)
    # the next tick comes a whole interval after the read, plus a little lag
    status, _ = node_status(state.nodes["node-b"], READ_AT + INTERVAL_S + 0.3, INTERVAL_S, Thresholds())
    return status


def test_a_target_late_in_the_scrape_cycle_is_not_stale() -> None:
    # judged 1.9 + 2.3 = 4.2 s older than the backend's newest: stale past 4 s
    assert status_after_a_late_tick(trails_s=1.9) == "ok"


def test_a_target_the_backend_stopped_scraping_still_ages() -> None:
    # excused at most one interval: 30 s behind the newest is gone
    assert status_after_a_late_tick(trails_s=30.0) == "unreachable"
    assert status_after_a_late_tick(trails_s=5.0) == "stale"
