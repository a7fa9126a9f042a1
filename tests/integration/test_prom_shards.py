"""Sharded and global backends, as fleets past one Prometheus run them (issue 48): two real
Prometheus servers each scraping half the fleet (`hashmod` relabelling) and a third
federating both; vmagent in cluster mode (two members, each scraping its share) writing
into VictoriaMetrics. A layout naming the shards reads them concurrently and merges them by
node; a shard that is down is named once and its nodes are unknown, never unreachable; the
global layer is just another URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infertop.cli.snapshot import failing_verdicts
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.integration.test_prom_source import (
    FULL_WINDOW_S,
    by_name,
    layout_text,
    rate_tolerance,
    run_monitor,
)
from tests.support.metrics_backend import BackendProcess
from tests.support.prometheus_server import (
    PrometheusServer,
    SimNode,
    SimRates,
    hashmod,
    prometheus_available,
)
from tests.support.victoria_server import (
    VictoriaMetricsServer,
    VmAgent,
    victoria_available,
    vmagent_available,
)
from tests.support.waiting import until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

FLEET = tuple(f"decode-{i:02d}" for i in range(1, 7))


@pytest.fixture(scope="module")
def fleet() -> Iterator[list[SimNode]]:
    """The fleet, its ports chosen so that each of two shards scrapes half of it."""
    nodes: list[SimNode] = []
    per_shard = [0, 0]
    for name in FLEET:
        node = SimNode(name)
        while per_shard[hashmod(node.target().address, 2)] >= len(FLEET) // 2:
            node = SimNode(name)  # another free port
        per_shard[hashmod(node.target().address, 2)] += 1
        nodes.append(node.start())
    yield nodes
    for n in nodes:
        n.stop()


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory, fleet: list[SimNode]) -> Iterator[list[PrometheusServer]]:
    """[shard 0, shard 1, global]: each shard scrapes the targets hashing to it; the global
    one federates both."""
    targets = [n.target() for n in fleet]
    servers = [PrometheusServer(tmp_path_factory.mktemp(f"shard{i}"), targets, shard=(i, 2)) for i in range(2)]
    for s in servers:
        s.start()
    top = PrometheusServer(tmp_path_factory.mktemp("global"), federate=[f"127.0.0.1:{s.port}" for s in servers])
    top.start()
    try:
        for s in servers:  # each its half, as Prometheus' own hashmod splits it
            s.wait_for_series("vllm:generation_tokens_total", len(FLEET) // 2)
        assert sum(s.series_count("vllm:generation_tokens_total") for s in servers) == len(FLEET)
        top.wait_for_series("vllm:generation_tokens_total", len(FLEET))
        yield [*servers, top]
    finally:
        for s in (*servers, top):
            s.stop()


def layout(urls: list[str]) -> str:
    listed = ", ".join(f'"{u}"' for u in urls)
    text = layout_text(urls[0], nodes=FLEET)
    return text.replace(f'url = "{urls[0]}"', f"url = [{listed}]")


def assert_every_node_right(snapshot: Snapshot, scrapers: list[BackendProcess]) -> None:
    """Every node ok and counted once; its rate within the scrapers' own timing
    (test_prom_source.rate_tolerance: 1 % plus their longest scrape over the window)."""
    nodes = by_name(snapshot)
    truth = SimRates()
    rel = max(rate_tolerance(s) for s in scrapers)  # type: ignore[arg-type]
    for name in FLEET:
        node = nodes[name]
        assert node.status == "ok", node
        assert node.engine is not None
        assert node.engine.decode_steps_per_s == pytest.approx(truth.steps_per_s, rel=rel)
        assert node.engine.requests_running == truth.running  # never summed over two backends
        assert len(node.gpus) == truth.gpus


async def test_two_hashmod_shards_read_as_one_fleet_and_a_shard_down_is_said_once(
    shards: list[PrometheusServer],
) -> None:
    shard0, shard1, _ = shards
    monitor = Monitor(parse_layout(layout([shard0.url, shard1.url])))
    await monitor.start(tick=False)
    try:
        await until_async(lambda: all(n.status == "ok" for n in monitor.tick().nodes), 60, "every node ok",
                          every_s=0.5)
        assert [(b.role, b.status) for b in monitor.tick().backends] == [("shard", "ok"), ("shard", "ok")]
        on_shard1 = {r["metric"]["instance"].split(":")[0] for r in shard1.query("vllm:num_requests_running")}
        shard1.stop()

        def shard1_said() -> bool:
            nodes = by_name(monitor.tick())
            return all(nodes[n].status == "unknown" for n in on_shard1)

        await until_async(shard1_said, 30, "shard 1's nodes unknown", every_s=0.5)
        # well past the unreachable threshold (8 intervals): still the shard's, not the nodes'
        await until_async(lambda: all((by_name(monitor.tick())[n].age_s or 0) > 9 for n in on_shard1), 30,
                          "shard 1's nodes' age past unreachable", every_s=0.5)
        snapshot = monitor.tick()
        nodes = by_name(snapshot)
        for name in FLEET:
            if name in on_shard1:
                assert nodes[name].status == "unknown" and nodes[name].verdicts == []
                assert nodes[name].error == f"shard down: prometheus {shard1.url}: connection refused"
            else:
                assert nodes[name].status == "ok", nodes[name]
        down = [b for b in snapshot.backends if b.status == "down"]
        assert [(b.name, b.nodes) for b in down] == [(f"prometheus {shard1.url}", len(on_shard1))]
        assert down[0].note == (f"shard down — prometheus {shard1.url}: connection refused: "
                                f"{len(on_shard1)} node{'s' if len(on_shard1) != 1 else ''} unknown")
        assert failing_verdicts(snapshot, "critical") == [f"shard prometheus {shard1.url}: down"]
        shard1.start()  # same port, same data
        await until_async(lambda: all(n.status == "ok" for n in monitor.tick().nodes), 60, "every node back",
                          every_s=0.5)
    finally:
        await monitor.stop()


async def test_the_global_layer_is_just_another_url(shards: list[PrometheusServer]) -> None:
    *scrapers, top = shards
    snapshot = await run_monitor(Monitor(parse_layout(layout([top.url]))), FULL_WINDOW_S, FLEET)
    assert_every_node_right(snapshot, list(scrapers))


async def test_shards_and_the_global_layer_together_count_each_node_once(shards: list[PrometheusServer]) -> None:
    urls = [s.url for s in shards]
    snapshot = await run_monitor(Monitor(parse_layout(layout(urls))), FULL_WINDOW_S, FLEET)
    assert_every_node_right(snapshot, list(shards[:2]))


@pytest.mark.skipif(not (victoria_available() and vmagent_available()),
                    reason="Debian packages victoria-metrics and vmagent not installed")
async def test_vmagent_cluster_mode_into_victoriametrics(tmp_path: Path, fleet: list[SimNode]) -> None:
    vm = VictoriaMetricsServer(tmp_path / "vm", latency_offset="1s")
    (tmp_path / "vm").mkdir()
    agents = [VmAgent(tmp_path, [n.target() for n in fleet], vm.url, member=(i, 2)) for i in range(2)]
    vm.start()
    try:
        for agent in agents:
            agent.start()
        vm.wait_for_series("vllm:generation_tokens_total", len(FLEET))
        # each member scrapes its share, none the whole fleet
        shares = [len(agent.active_targets()) for agent in agents]
        assert sum(shares) == len(FLEET) and all(shares), shares
        snapshot = await run_monitor(Monitor(parse_layout(layout([vm.url]))), FULL_WINDOW_S, FLEET)
        assert_every_node_right(snapshot, [vm])  # vmagent writes each target's scrape_duration_seconds
    finally:
        for agent in agents:
            agent.stop()
        vm.stop()
