"""Two jobs scraping the same nodes (an overlapping job, an HA pair read without dedup):
every series comes twice, and a sum by node doubled every counter-derived figure silently
(issue 48: steps/s 80 for 40). Against a real Prometheus with two overlapping jobs: the
copies are found and collapsed from the first figures, and the backend says so; named in
the layout (`replica_label`), they are collapsed without a word."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from tests.integration.test_prom_source import FULL_WINDOW_S, NODES, by_name, layout_text, run_monitor
from tests.support.prometheus_server import PrometheusServer, SimNode, SimRates, prometheus_available

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    nodes = [SimNode(n).start() for n in NODES]
    server = PrometheusServer(tmp_path_factory.mktemp("prom2"), [n.target() for n in nodes])
    server.jobs = 2
    server.start()
    try:
        server.wait_for_series("vllm:generation_tokens_total", 2 * len(nodes))  # every series twice
        yield server
    finally:
        server.stop()
        for n in nodes:
            n.stop()


@pytest.mark.parametrize("named", [False, True])
async def test_overlapping_jobs_are_collapsed_not_summed(two_jobs: PrometheusServer, named: bool) -> None:
    extra = 'replica_label = "job"' if named else ""
    snapshot = await run_monitor(Monitor(parse_layout(layout_text(two_jobs.url, extra))), FULL_WINDOW_S)
    nodes = by_name(snapshot)
    truth = SimRates()
    for name in NODES:
        node = nodes[name]
        assert node.status == "ok", node
        engine = node.engine
        assert engine is not None
        assert engine.decode_steps_per_s == pytest.approx(truth.steps_per_s, rel=0.05)
        assert engine.accepted_tokens_per_s == pytest.approx(truth.generation_per_s, rel=0.05)
        assert (engine.requests_running, engine.requests_waiting) == (truth.running, truth.waiting)
        assert node.rx_bytes_per_s == pytest.approx(truth.nic_rx_bytes_per_s, rel=0.05)
        assert len(node.gpus) == truth.gpus and node.gpus[0].power_w == truth.power_w
    [backend] = snapshot.backends
    if named:
        assert backend.note is None
    else:
        assert backend.detail is not None and backend.note is not None
        assert backend.detail.startswith("2 nodes' targets scraped by more than one job: copies collapsed")
        assert 'replica_label = ["job"]' in backend.note


def test_the_layout_names_replica_labels() -> None:
    layout = parse_layout(layout_text("http://127.0.0.1:9", 'replica_label = ["replica", "prometheus_replica"]'))
    assert layout.prometheus is not None
    assert layout.prometheus.replica_labels == ("replica", "prometheus_replica")
