"""The `prom` source against a real VictoriaMetrics scraping simulated exporters.

VictoriaMetrics answers queries near "now" from `-search.latencyOffset` in the past (30 s
by default; 6 s here, past the unreachable threshold of 5 intervals of 1 s): every sample
it returns is that much older than one from Prometheus. The delay is the backend's, said
once (Snapshot.backends), and the nodes are judged against the newest sample it holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infertop.layouts import parse_layout
from infertop.monitor.exporter import snapshot_families
from infertop.monitor.monitor import Monitor
from infertop.monitor.text_report import snapshot_table
from tests.support.prometheus_server import SimNode
from tests.support.victoria_server import VictoriaMetricsServer, victoria_available
from tests.support.waiting import until, until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not victoria_available(), reason="Debian package victoria-metrics not installed"),
]

NODES = ("decode-01", "decode-02")
OFFSET_S = 6.0


@pytest.fixture(scope="module")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetricsServer]:
    nodes = [SimNode(n).start() for n in NODES]
    server = VictoriaMetricsServer(tmp_path_factory.mktemp("vm"), [n.target() for n in nodes],
                                   latency_offset=f"{OFFSET_S:g}s")
    server.start()
    try:
        server.wait_for_series("vllm:generation_tokens_total", len(nodes))
        # a few more scrapes visible past the latency offset: rates need two
        until(lambda: min(float(r["value"][1]) for r in server.query("count_over_time(up[1m])")) >= 4, 60,
              "4 scrapes of every target visible", every_s=0.2, ignore=(ValueError,))
        yield server
    finally:
        server.stop()
        for n in nodes:
            n.stop()


def window_covered(monitor: Monitor, node: str, tier: str, window_s: float) -> bool:
    state = monitor.state.nodes.get(node)
    ring = state.by_source.get(tier) if state is not None else None
    return bool(ring) and ring[-1].taken_at - ring[0].taken_at >= window_s  # type: ignore[index]


def layout_text(url: str) -> str:
    listed = "".join(f'\n[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n' for n in NODES)
    return f"""
[cluster]
name = "vm-test"
interval_s = 1.0
window_s = 4.0

[pricing]
gpu_hour_usd = 2.0

[prometheus]
url = "{url}"
backfill_s = 0
{listed}
"""


async def test_the_backends_delay_is_said_once_not_blamed_on_the_nodes(victoria: VictoriaMetricsServer) -> None:
    layout = parse_layout(layout_text(victoria.url))
    monitor = Monitor(layout)
    await monitor.start(tick=False)
    try:
        # the window full of readings for every node and tier: its rates span all of it
        await until_async(lambda: all(window_covered(monitor, name, tier, layout.cluster.window_s)
                                      for name in NODES for tier in ("prom:engine", "prom:node", "prom:gpu")),
                          30.0, "a full window of readings for every node", every_s=0.2)
        snapshot = monitor.tick()
    finally:
        await monitor.stop()
    [backend] = snapshot.backends
    assert backend.name == f"prometheus {victoria.url}"
    assert backend.behind_s is not None and OFFSET_S - 1.0 <= backend.behind_s < OFFSET_S + 3.0
    nodes = {n.name: n for n in snapshot.nodes}
    for name in NODES:
        node = nodes[name]
        # the samples are as old as the backend's delay, and the node is fine
        assert node.age_s is not None and node.age_s >= OFFSET_S - 1.0
        assert node.status == "ok", node
        assert not [v for v in node.verdicts if v.kind in ("stale", "unreachable")]
        engine = node.engine
        assert engine is not None
        # the simulated truth (tests/support/prometheus_server.py SimRates), over the whole window:
        # it ends at the newest sample the backend holds, not at the wall clock (where it
        # would hold only the last two readings, and a rate over 1 s swings with jitter)
        assert engine.decode_steps_per_s == pytest.approx(40.0, rel=0.03)
        assert engine.accepted_tokens_per_s == pytest.approx(93.0, rel=0.03)
        assert engine.draft_acceptance == pytest.approx(63.0 / 90.0, rel=0.01)
        assert (engine.requests_running, engine.kv_cache_usage) == (12, 0.42)
        assert node.gpus[3].util_pct == 84.0 and node.gpus[3].power_w == 615.5
        [eth0] = node.nics
        assert eth0.rx_bytes_per_s == pytest.approx(5e9, rel=0.03)
    # the text report says it once, when it is worth saying (VictoriaMetrics' default 30 s)
    far_behind = snapshot.model_copy(update={"backends": [backend.model_copy(update={"behind_s": 31.0})]})
    said = [line for line in snapshot_table(far_behind).splitlines() if backend.name in line]
    assert said == [f"{backend.name}: its newest sample is 31 s old (nodes are judged against it)"]
    assert backend.name not in snapshot_table(snapshot)  # 6 s: a scrape or two, not news
    exported = {f.name: f for f in snapshot_families(snapshot)}
    [sample] = exported["infertop_backend_behind_seconds"].samples
    assert sample.labels == {"backend": backend.name} and sample.value == backend.behind_s
