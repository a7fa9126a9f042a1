"""The prom source reads dcgm-exporter's clock-event reasons through a real Prometheus, so
the throttled verdict can fire on a Prometheus-read cluster; a node whose exporter does not
collect them (dcgm-exporter's default) is blind on throttling, and the reason says so."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from infertop.collectors.sources.promql import CLOCK_REASONS_UNSEEN
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.prometheus_server import PrometheusServer, SimNode, prometheus_available
from tests.support.waiting import until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

HW_THERMAL = 0x40


class ClockReasons(Collector):
    """The field a dcgm-exporter serves once the recommended counters are on: GPU 1 hot."""

    def __init__(self, name: str, gpus: int):
        self.name, self.gpus = name, gpus

    def collect(self) -> Iterable[Any]:
        fam = GaugeMetricFamily("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event reasons",
                                labels=["gpu", "UUID", "modelName", "Hostname"])
        for i in range(self.gpus):
            fam.add_metric([str(i), f"GPU-{self.name}-{i}", "NVIDIA H200", self.name], HW_THERMAL if i == 1 else 0)
        yield fam


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    seen, stock = SimNode("decode-01"), SimNode("decode-02")
    seen.registry.register(ClockReasons("decode-01", seen.rates.gpus))
    nodes = [seen.start(), stock.start()]
    server = PrometheusServer(tmp_path_factory.mktemp("prom-blind"), [n.target() for n in nodes])
    server.start()
    try:
        server.wait_for_series("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", seen.rates.gpus)
        server.wait_for_series("vllm:generation_tokens_total", 2)
        yield server
    finally:
        server.stop()
        for n in nodes:
            n.stop()


async def test_clock_event_reasons_through_prometheus_and_blind_where_absent(prom: PrometheusServer) -> None:
    nodes = "".join(f'\n[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n' for n in ("decode-01", "decode-02"))
    layout = parse_layout(f"""
[cluster]
name = "prom-blind"
interval_s = 1.0
window_s = 4.0

[thresholds]
stale_intervals = 4
unreachable_intervals = 8
hold_s = 1
clear_s = 1

[prometheus]
url = "{prom.url}"
backfill_s = 0
{nodes}""")
    monitor = Monitor(layout)
    await monitor.start(tick=False)
    try:
        frames: list[Snapshot] = []

        def settled() -> bool:
            frames.append(monitor.tick())
            kinds = {n.name: [v.kind for v in n.verdicts] for n in frames[-1].nodes}
            return kinds == {"decode-01": ["throttled"], "decode-02": ["blind"]}

        # ticked at the monitor's own cadence (0.5 s), as a running monitor would
        await until_async(settled, 20, "throttled and blind verdicts", every_s=0.5,
                          detail=lambda: {n.name: [(v.kind, v.detail) for v in n.verdicts] for n in frames[-1].nodes})
        frame = frames[-1]
        views = {n.name: n for n in frame.nodes}
    finally:
        await monitor.stop()
    seen, stock = views["decode-01"], views["decode-02"]
    assert [g.clock_event_reasons for g in seen.gpus][:3] == [0, HW_THERMAL, 0]
    assert [(v.kind, v.detail) for v in seen.verdicts] == [("throttled", "GPU 1 HwThermal")]
    assert seen.coverage == []
    assert all(g.clock_event_reasons is None for g in stock.gpus)
    assert [(v.kind, v.detail) for v in stock.verdicts] == [("blind", f"throttle unknown: {CLOCK_REASONS_UNSEEN}")]
    assert frame.cluster.blind_nodes == 1
