"""`make demo` shows issue 36's three troubles: a congested prefill → decode pair (pause
frames and port_xmit_wait on both ends, slow NIXL transfers), a drifted node (another KV
block size) and engine restarts on the timeline — read from the demo's realistic pages
through the real parsers and the monitor."""

from __future__ import annotations

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import NodeSample
from infertop.demo import realistic, realistic_hosts
from infertop.demo.node_collectors import INFERTOP_COLLECTORS
from infertop.demo.pd_trouble import CONGESTED_SLOWDOWN, PAUSE_PER_S
from infertop.demo.scenario import SimCluster, restart_order
from infertop.layouts.model import ClusterConfig, Layout, NodeConfig, PricingConfig
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot

T0 = 1_800_000_000.0
STEP_S = 10.0
RESTART_EVERY_S = 60.0


def run_demo(ticks: int, step_s: float = STEP_S, window_s: float = 3 * STEP_S,
             nodes: int = 8) -> tuple[SimCluster, list[Snapshot]]:
    """The demo's cluster (of 8 by default) through its realistic pages, the real parsers
    and the monitor, one tick every `step_s` of simulated time."""
    cluster = SimCluster(nodes, started_at=T0, restart_every_s=RESTART_EVERY_S)
    layout = Layout.model_validate({
        "cluster": ClusterConfig(name="demo", interval_s=step_s, window_s=window_s),
        "pricing": PricingConfig(gpu_hour_usd=2.5),
        "thresholds": {"hold_s": 10, "clear_s": 10},
        "nodes": [NodeConfig(name=p.name, role=p.role, gpus=8) for p in cluster.plans],  # type: ignore[arg-type]
    })
    monitor = Monitor(layout, sources=[], clock=lambda: T0)
    snaps = []
    for i in range(1, ticks + 1):
        now = T0 + i * step_s
        for name, node in cluster.nodes.items():
            engine = engine_sample_from_text(realistic.engine_page(node, now), "vllm")
            host = realistic_hosts.collected_node_exporter_page(node, now, INFERTOP_COLLECTORS)
            parts = parts_from_exporter(parse_exposition(host, "node", wanted=EXPORTER_WANTED))
            gpus = parts_from_exporter(parse_exposition(realistic_hosts.dcgm_page(node, now), "dcgm",
                                                        wanted=EXPORTER_WANTED))
            monitor.fleet.ingest(NodeSample(node=name, source="scrape", taken_at=now, engine=engine,
                                           nics=parts.get("nics"), gpus=gpus.get("gpus")))  # type: ignore[arg-type]
        snaps.append(monitor.tick(now))
    return cluster, snaps


@pytest.fixture(scope="module")
def demo() -> tuple[SimCluster, list[Snapshot]]:
    return run_demo(14)


def test_the_drifted_node_is_named(demo: tuple[SimCluster, list[Snapshot]]) -> None:
    _, snaps = demo
    nodes = {n.name: n for n in snaps[-1].nodes}
    drift = {(d.setting, d.value, d.pool_value) for d in nodes["decode-05"].config_drift}
    assert ("cache.block_size", "32", "64") in drift
    assert any(v.kind == "config-drift" for v in nodes["decode-05"].verdicts)
    assert not any(nodes[n].config_drift for n in nodes if n != "decode-05")


def test_the_congested_pair_shows_pause_and_slow_transfers(demo: tuple[SimCluster, list[Snapshot]]) -> None:
    _, snaps = demo
    (path,) = snaps[-1].pd_paths
    assert path.congested is True and path.evidence is not None and "pause" in path.evidence
    assert path.prefill is not None and path.decode is not None
    assert any(p.startswith("prefill-01/eth0: prio 3 pause rx") for p in path.prefill.congested_ports)
    assert any(p.startswith("decode-02/eth0: prio 3 pause rx") for p in path.decode.congested_ports)
    assert path.decode.rx_pause_per_s == pytest.approx(PAUSE_PER_S, rel=0.05)  # decode-02 only, rising
    nodes = {n.name: n for n in snaps[-1].nodes}
    slow = nodes["decode-02"].engine
    calm = nodes["decode-03"].engine
    assert slow is not None and calm is not None
    assert slow.kv_transfer_mean_s is not None and calm.kv_transfer_mean_s is not None
    assert slow.kv_transfer_mean_s == pytest.approx(CONGESTED_SLOWDOWN * calm.kv_transfer_mean_s, rel=0.01)
    assert path.above_line_rate is False


def test_each_restart_is_once_on_the_timeline_at_its_time(demo: tuple[SimCluster, list[Snapshot]]) -> None:
    cluster, snaps = demo
    restarts = [e for e in snaps[-1].timeline if e.kind == "restart"]
    order = restart_order(cluster.plans)
    # one engine restarts every RESTART_EVERY_S, in turn; seen at the first sample after it
    expected = [(order[k - 1], T0 + k * RESTART_EVERY_S) for k in (1, 2)]
    assert [(e.node, e.at) for e in restarts] == expected
    assert sum(n.restarts for n in cluster.nodes.values()) == len(restarts)
