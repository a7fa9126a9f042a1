"""A metrics backend that is down is one finding, on the backend: the nodes only it shows
are `unknown`, never stale, unreachable or in error on their own (issue 48)."""

from __future__ import annotations

import pytest

from infertop.collectors.fleet import FleetState
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.collectors.source import BackendState
from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.backends import backend_view, unseen_nodes
from infertop.monitor.evaluation.figures import node_status

INTERVAL_S = 1.0
T0 = 1_800_000_000.0
DOWN = BackendState(name="prometheus http://p:9090", error="connection refused", since=T0,
                    nodes=frozenset({"a", "b"}), role="shard")


def state_read_at(taken_at: float | None) -> FleetState:
    state = FleetState(["a"])
    if taken_at is not None:
        state.add(NodeSample(node="a", source="prom:engine", taken_at=taken_at,
                             engine=EngineSample(requests_running=1.0)))
    return state


@pytest.mark.parametrize(("age_s", "unseen", "status"), [
    (0.5, None, "ok"),
    (0.5, "shard down", "ok"),  # fresh figures are fresh, whatever the backend does now
    (3.0, None, "stale"),
    (3.0, "shard down", "unknown"),
    (30.0, None, "unreachable"),
    (30.0, "shard down", "unknown"),
    (None, None, "stale"),  # never heard from, no error: still connecting
    (None, "shard down", "unknown"),
])
def test_a_node_a_down_backend_alone_shows_is_unknown(
    age_s: float | None, unseen: str | None, status: str
) -> None:
    now = T0 + 100
    state = state_read_at(None if age_s is None else now - age_s)
    got, _ = node_status(state.nodes["a"], now, INTERVAL_S, Thresholds(), unseen_because=unseen)
    assert got == status


def test_the_down_backend_is_said_once_with_its_nodes() -> None:
    up = BackendState(name="prometheus http://q:9090", behind_s=0.5, nodes=frozenset({"c"}), role="shard")
    assert unseen_nodes([DOWN, up]) == {
        "a": "shard down: prometheus http://p:9090: connection refused",
        "b": "shard down: prometheus http://p:9090: connection refused",
    }
    view = backend_view(DOWN)
    assert (view.status, view.nodes, view.since) == ("down", 2, T0)
    assert view.note == "shard down — prometheus http://p:9090: connection refused: 2 nodes unknown"
    assert backend_view(up).note is None and backend_view(up).nodes == 0
