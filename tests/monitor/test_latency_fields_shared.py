"""The latency figures of the snapshot are declared once (monitor/snapshot.py) and shared by
the three views that carry them: a node's engine, each of its data-parallel engines, a pool.
Their JSON key order, kept through the sharing, is held by test_snapshot_bytes.py."""

from __future__ import annotations

import inspect
from collections.abc import Iterable

from pydantic import BaseModel

from infertop.monitor import snapshot
from infertop.monitor.evaluation.latency import LATENCIES, PERCENTILES
from infertop.monitor.snapshot import EngineRankView, EngineView, RankLatency, RollupView, WindowLatency

# what the evaluation fills in (scoreboard.latency_figures): every latency's percentiles,
# the buckets they fell in and the observations counted
LATENCY_FIELDS = {f"{name}_{label}_s" for name in LATENCIES for label, _ in PERCENTILES} | {
    "latency_bounds_s", "latency_requests",
}
RANK_LATENCY_FIELDS = {"ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s", "latency_bounds_s"}


def _models() -> list[type[BaseModel]]:
    return [m for m in vars(snapshot).values() if isinstance(m, type) and issubclass(m, BaseModel)]


def _declaring(field: str, models: Iterable[type[BaseModel]]) -> list[str]:
    """The models whose own class body declares `field`."""
    return [model.__name__ for model in models if field in inspect.get_annotations(model)]


def test_each_latency_field_is_declared_in_one_class() -> None:
    declared = {field: _declaring(field, _models()) for field in sorted(LATENCY_FIELDS)}
    assert {field: len(where) for field, where in declared.items()} == dict.fromkeys(declared, 1), declared


def test_the_views_carry_the_shared_latency_fields() -> None:
    assert set(WindowLatency.model_fields) == LATENCY_FIELDS
    assert set(RankLatency.model_fields) == RANK_LATENCY_FIELDS
    for view in (EngineView, RollupView):
        assert issubclass(view, WindowLatency)
        assert view.model_fields.keys() & LATENCY_FIELDS == LATENCY_FIELDS
    assert issubclass(EngineRankView, RankLatency)
    assert EngineRankView.model_fields.keys() & LATENCY_FIELDS == RANK_LATENCY_FIELDS  # a rank's set, no more


def test_a_second_declaration_would_be_caught() -> None:
    # the check above can fail: a model that declares a latency field again is found
    class Again(RollupView):
        ttft_p99_s: float | None = None

    assert _declaring("ttft_p99_s", [*_models(), Again]) == ["_TtftItlPercentiles", "Again"]
