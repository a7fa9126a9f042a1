"""A metrics backend that is down is one finding, on the backend: the nodes only it shows
are `unknown`, never stale, unreachable or in error on their own (issue 48)."""

from __future__ import annotations

import datetime as dt

import pytest

from infertop.collectors.fleet import FleetState
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.collectors.sources.source import BackendState
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


def test_back_lately_its_nodes_not_scraped_since_wait_for_it() -> None:
    """A backend back after being down, restarted or reloaded: its nodes with no scrape
    since are unknown for a while (their scrape loops start again up to an interval
    apart), never stale; those scraped since are judged as usual."""
    from infertop.collectors.sources.prom import PromSource
    from infertop.layouts.model import PrometheusConfig

    clock = [T0]
    source = PromSource(PrometheusConfig(url="http://127.0.0.1:9"), ["a", "b"], INTERVAL_S, clock=lambda: clock[0])
    [backend] = source.backends
    backend.failed("connection refused", T0 - 12)
    source._last_at[("a", "engine")] = T0 - 13  # before it went away
    source._last_at[("b", "engine")] = T0 - 13
    backend.answered(T0)
    source._last_at[("b", "engine")] = T0 - 0.5  # scraped again since
    [state] = source.backend_states()
    assert state.error is None and state.waiting == {"a"}
    assert state.settling == "back after 12 s down 0 s ago"
    assert unseen_nodes([state]) == {"a": "backend back after 12 s down 0 s ago: prometheus http://127.0.0.1:9: "
                                          "waiting for its next scrape"}
    assert backend_view(state).detail == "back after 12 s down 0 s ago: 1 node waiting for the next scrape (unknown)"
    clock[0] = T0 + source.settle_s() + 1  # past the settling time: the node's own again
    [state] = source.backend_states()
    assert state.waiting == frozenset() and unseen_nodes([state]) == {}
    # a reload said by Prometheus' runtime info: the first read of a long-ago start says nothing
    backend.saw_runtime("2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z", clock[0])
    assert source.backend_states()[0].settling is None
    reload_at = clock[0] - 2
    stamp = dt.datetime.fromtimestamp(reload_at, dt.UTC).isoformat().replace("+00:00", "Z")
    backend.saw_runtime("2020-01-01T00:00:00Z", stamp, clock[0])
    [state] = source.backend_states()
    assert state.settling == "config reloaded 2 s ago" and state.waiting == {"a", "b"}
