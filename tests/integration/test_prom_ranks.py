"""Per-rank engines through the `prom` source (issue 35): a real Prometheus scrapes a vLLM
0.33 page whose 8 data-parallel engines differ (`engine` label; built from vLLM's own
definitions: tests/support/vllm_ranks_page.py); each rank's figures, read back through
PromQL, are within 2 % of the truth the page was driven with."""

from __future__ import annotations

import asyncio
import statistics
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.prom import prom_source_for
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.engine_ranks import rank_views
from infertop.monitor.evaluation.figures import engine_view
from tests.support.prometheus_server import PrometheusServer, Target, prometheus_available
from tests.support.vllm_ranks_page import VllmRanksServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

NODE = "decode-05"
DT = 10.0
STEPS = [30.0, 30.0, 30.0, 30.0, 30.0, 18.0, 30.0, 30.0]  # engine 5 straggles
ACCEPT = [0.7, 0.72, 0.68, 0.7, 0.71, 0.5, 0.69, 0.7]
ITL = [0.03, 0.03, 0.03, 0.03, 0.03, 0.06, 0.03, 0.03]


class _Page(BaseHTTPRequestHandler):
    text = ""

    def do_GET(self) -> None:
        body = type(self).text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[tuple[type[_Page], int]]:
    handler = type("Page", (_Page,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, server.server_address[1]
    server.shutdown()
    server.server_close()


def _layout(url: str) -> str:
    return f"""
[cluster]
name = "prom-ranks"
interval_s = 1.0
window_s = 4.0
tensor_parallel_size = 2

[pricing]
gpu_hour_usd = 2.0

[prometheus]
url = "{url}"
node_label = "node"
backfill_s = 0

[[nodes]]
name = "{NODE}"
role = "decode"
gpus = 16
engine = {{ profile = "vllm" }}
"""


async def test_each_engine_through_prometheus_within_2_percent(
        tmp_path: Path, page_server: tuple[type[_Page], int]) -> None:
    handler, port = page_server
    server = VllmRanksServer(engines=8)
    server.advance_ranks(DT, STEPS, ACCEPT, [0.2] * 8)  # before the window: other latencies
    handler.text = server.page()
    before = [(e.steps, e.generation_tokens, t.drafts, t.accepted, len(t.itl_s))
              for e, t in zip(server.engines, server.truth, strict=True)]
    server.advance_ranks(DT, STEPS, ACCEPT, ITL)
    second = server.page()

    prom = PrometheusServer(tmp_path, [Target(f"127.0.0.1:{port}", {"node": NODE})])
    prom.start()
    source = prom_source_for(parse_layout(_layout(prom.url)))
    assert source is not None
    try:
        async def engine_reading(steps0: int) -> NodeSample | None:
            """The node's engine reading once Prometheus has scraped the page whose engine 0
            has stepped `steps0` times."""
            for s in await source.poll():
                if s.node == NODE and s.engine is not None and s.engine.ranks:
                    if s.engine.ranks[0].engine.steps_total == steps0:
                        return s
            return None

        async def reading_of(steps0: int, what: str) -> NodeSample:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30.0
            while (found := await engine_reading(steps0)) is None:
                assert loop.time() < deadline, f"timed out waiting for {what}"
                await asyncio.sleep(0.2)
            return found

        first = await reading_of(before[0][0], "the first page through Prometheus")
        handler.text = second
        last = await reading_of(server.engines[0].steps, "the second page through Prometheus")
    finally:
        await source.close()
        prom.stop()

    assert first is not None and last is not None
    span = last.taken_at - first.taken_at  # Prometheus' own scrape times of the two pages
    assert span > 0
    ranks = rank_views([first, last], now=last.taken_at, node_gpus=16, tp=2)
    assert ranks is not None and len(ranks) == 8
    for i, (rank, e, t, (steps0, tokens0, drafts0, accepted0, itl0)) in enumerate(
            zip(ranks, server.engines, server.truth, before, strict=True)):
        assert rank.key == f"engine={i}" and rank.dp_rank == i
        assert rank.gpus == [2 * i, 2 * i + 1] and rank.gpus_from == "layout"
        assert rank.decode_steps_per_s == pytest.approx((e.steps - steps0) / span, rel=0.02)
        assert rank.accepted_tokens_per_s == pytest.approx((e.generation_tokens - tokens0) / span, rel=0.02)
        drafts, accepted = t.drafts - drafts0, t.accepted - accepted0
        assert rank.draft_acceptance == pytest.approx(accepted / (drafts * server.k), rel=0.02)
        assert rank.mean_acceptance_length == pytest.approx(1 + accepted / drafts, rel=0.02)
        assert rank.requests_running == e.running and rank.requests_waiting == e.waiting
        assert rank.kv_cache_usage == pytest.approx(e.kv_cache_usage, rel=0.02)
        lower, upper = rank.latency_bounds_s["itl_p50"]
        true_p50 = statistics.median(t.itl_s[itl0:])
        assert lower <= true_p50 <= (upper if upper is not None else float("inf"))
    slow = min(ranks, key=lambda r: r.decode_steps_per_s or 0.0)
    assert slow.label == "engine 5 (GPUs 10–11)"
    # the node's own figures stay the roll-up: its decode steps/s is the fastest rank's
    node = engine_view([first, last], now=last.taken_at)
    assert node is not None
    assert node.decode_steps_per_s == pytest.approx(max(r.decode_steps_per_s or 0 for r in ranks), rel=0.02)
    assert node.requests_running == sum(e.running for e in server.engines)
