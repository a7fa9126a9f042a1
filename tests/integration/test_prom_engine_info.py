"""Engine settings and health through the `prom` source: a real Prometheus scraping vLLM
0.33 pages (`vllm:cache_config_info`, `vllm:engine_healthy`; tests/support/vllm_info_page.py)
whose targets carry labels of their own (pod, namespace), as a Kubernetes scrape adds them.
The settings equal the page's, none of Prometheus's labels is taken for a setting, and the
node whose block size differs from its pool's is the drifted one."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.prometheus_server import PrometheusServer, Target, free_port, prometheus_available
from tests.support.sglang_page import SglangServer
from tests.support.vllm_info_page import CACHE_CONFIG, VllmInfoServer
from tests.support.waiting import until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

NODES = ("decode-01", "decode-02", "decode-03")
DRIFTED = {**CACHE_CONFIG, "block_size": "32"}


SGLANG_NODE = "prefill-01"


def serve_page(engine: VllmInfoServer | SglangServer) -> ThreadingHTTPServer:
    """The engine's page in the text format, on a loopback port of the kernel's choosing."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = engine.page().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    engines: dict[str, VllmInfoServer | SglangServer] = {
        "decode-01": VllmInfoServer(), "decode-02": VllmInfoServer(seed=1),
        "decode-03": VllmInfoServer(settings=DRIFTED, seed=2), SGLANG_NODE: SglangServer(dp=2)}
    engines["decode-02"].healthy = False  # type: ignore[union-attr]
    engines[SGLANG_NODE].advance(10.0)  # type: ignore[union-attr]
    servers = {name: serve_page(engine) for name, engine in engines.items()}
    targets = [Target(f"127.0.0.1:{s.server_address[1]}",
                      {"instance": f"{name}:8000", "pod": f"vllm-{name}-7f9c", "namespace": "infer"})
               for name, s in servers.items()]
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), targets)
    server.start()
    try:
        server.wait_for_series("vllm:cache_config_info", 2 * len(NODES))
        yield server
    finally:
        server.stop()
        for s in servers.values():
            s.shutdown()
            s.server_close()


def layout(url: str) -> str:
    listed = "".join(f'\n[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n' for n in NODES)
    listed += f'\n[[nodes]]\nname = "{SGLANG_NODE}"\nrole = "prefill"\ngpus = 8\n'
    return f"""
[cluster]
name = "prom-info"
interval_s = 1.0
window_s = 4.0
[pricing]
gpu_hour_usd = 2.0
[thresholds]
stale_intervals = 4
unreachable_intervals = 8
[prometheus]
url = "{url}"
backfill_s = 0
{listed}
"""


async def first_frame_with_settings(monitor: Monitor) -> Snapshot:
    await monitor.start(tick=False)
    try:
        def all_read() -> bool:
            nodes = monitor.state.nodes
            return all(n in nodes and bool(nodes[n].by_source) for n in (*NODES, SGLANG_NODE))

        await until_async(all_read, 60, "an engine reading of every node through Prometheus")
        snap = monitor.tick()
        return snap
    finally:
        await monitor.stop()


async def test_settings_health_and_drift_through_prometheus(prom: PrometheusServer, tmp_path: Path) -> None:
    snap = await first_frame_with_settings(Monitor(parse_layout(layout(prom.url))))
    nodes = {n.name: n for n in snap.nodes}
    for name in NODES:
        engine = nodes[name].engine
        assert engine is not None and engine.settings is not None, name
        want = DRIFTED if name == "decode-03" else CACHE_CONFIG
        # exactly the page's settings: no instance, job, pod or namespace among them
        assert engine.settings == {f"cache.{k}": v for k, v in want.items()}, name
    assert nodes["decode-01"].engine.healthy is True  # type: ignore[union-attr]
    assert nodes["decode-02"].engine.healthy is False  # type: ignore[union-attr]
    (drift,) = nodes["decode-03"].config_drift
    assert (drift.setting, drift.value, drift.pool_value) == ("cache.block_size", "32", "64")
    assert not nodes["decode-01"].config_drift and not nodes["decode-02"].config_drift
    # SGLang's start-up constants, a gauge value per DP rank
    sglang = nodes[SGLANG_NODE].engine
    assert sglang is not None and sglang.settings == {
        "sglang.context_len": "163840", "sglang.max_total_num_tokens": "1204224", "sglang.page_size": "64"}
