"""The `prom` source's backfill against a real Prometheus that is slow to answer range
queries, as one holding the history of 512 nodes is: the live readings must not wait for
the history, and the history must not displace them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
from aiohttp import ClientSession, web

from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from tests.support.prometheus_server import PrometheusServer, SimNode, prometheus_available
from tests.support.waiting import until, until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

NODES = ("decode-01", "decode-02")
RANGE_DELAY_S = 6.0  # longer than the stale threshold below (4 intervals of 1 s)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    nodes = [SimNode(n).start() for n in NODES]
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [n.target() for n in nodes])
    server.start()
    try:
        server.wait_for_series("vllm:generation_tokens_total", len(nodes))
        # a few scrapes of history to backfill
        until(lambda: min(float(r["value"][1]) for r in server.query("count_over_time(up[60s])")) >= 5, 60,
              "5 scrapes of every target in Prometheus", every_s=0.2)
        yield server
    finally:
        server.stop()
        for n in nodes:
            n.stop()


async def slow_range_proxy(upstream: str, delay_s: float) -> tuple[web.AppRunner, str, list[float]]:
    """A reverse proxy that holds every range query until `delay_s` after it started;
    the list it returns gets the time each range query was answered."""
    session = ClientSession()
    answered: list[float] = []
    release_at = time.monotonic() + delay_s

    async def handle(request: web.Request) -> web.StreamResponse:
        ranged = request.path.endswith("/query_range")
        if ranged:
            await asyncio.sleep(max(release_at - time.monotonic(), 0.0))
        async with session.request(request.method, upstream + request.path_qs,
                                   data=await request.read(), headers={"Content-Type": request.content_type}) as resp:
            body = await resp.read()
        if ranged:
            answered.append(time.time())
        return web.Response(status=resp.status, body=body, content_type=resp.content_type)

    async def close_session(_app: web.Application) -> None:
        await session.close()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    app.on_cleanup.append(close_session)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}", answered


def layout_text(url: str) -> str:
    listed = "".join(f'\n[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n' for n in NODES)
    return f"""
[cluster]
name = "prom-backfill-test"
interval_s = 1.0
window_s = 10.0  # the monitor keeps 12 s: the history (6 s late) is still inside it

[pricing]
gpu_hour_usd = 2.0

[thresholds]
# Prometheus' figures are up to one scrape (1 s) older than the poll that reads them
stale_intervals = 4
unreachable_intervals = 8

[prometheus]
url = "{url}"
backfill_s = 300
{listed}
"""


async def wait_for(check: Callable[[], object], timeout_s: float) -> None:
    await until_async(check, timeout_s, "the condition", every_s=0.2)


async def test_a_slow_backfill_leaves_no_node_stale(prom: PrometheusServer) -> None:
    runner, url, answered = await slow_range_proxy(prom.url, RANGE_DELAY_S)
    monitor = Monitor(parse_layout(layout_text(url)))
    started = time.time()
    await monitor.start(tick=False)
    try:
        # every node is read live well before the history is in
        await wait_for(lambda: all(monitor.state.nodes[n].last_ok_at for n in NODES), 4.0)
        # two live readings of every tier, so every rate exists, still before the history
        await wait_for(lambda: all(len(monitor.state.nodes[n].by_source.get(tier, ())) >= 2
                                   for n in NODES for tier in ("prom:engine", "prom:node", "prom:gpu")), 4.0)
        early = {n.name: n for n in monitor.tick().nodes}
        assert not answered, "the range queries were not delayed: the test proves nothing"
        assert {n: early[n].status for n in NODES} == dict.fromkeys(NODES, "ok")
        first_live = {n: monitor.state.nodes[n].by_source["prom:engine"][0].taken_at for n in NODES}
        # then the history arrives, and is merged behind the live readings
        await wait_for(lambda: all(
            monitor.state.nodes[n].by_source["prom:engine"][0].taken_at < first_live[n] for n in NODES
        ), RANGE_DELAY_S + 20.0)
        # (less a clock tick: the proxy's asyncio.sleep may end a hair before the wall clock says)
        assert answered and min(answered) >= started + RANGE_DELAY_S - 0.05
        late = {n.name: n for n in monitor.tick().nodes}
        for name in NODES:
            node = late[name]
            assert node.status == "ok", node
            for tier in ("prom:engine", "prom:node", "prom:gpu"):
                times = [s.taken_at for s in monitor.state.nodes[name].by_source[tier]]
                assert times == sorted(times) and len(set(times)) == len(times), (tier, times)
            engine = node.engine
            assert engine is not None
            # the exporters' own rates (tests/support/prometheus_server.py SimRates): history
            # behind the live readings changes no figure
            assert engine.decode_steps_per_s == pytest.approx(40.0, rel=0.02)
            assert engine.accepted_tokens_per_s == pytest.approx(93.0, rel=0.02)
        # the ledger counts forward only: a merged-behind reading is not taken for a
        # counter reset (which would add the whole counter, ~1e5 tokens a node)
        counted = monitor.latest.session.accepted_tokens if monitor.latest else None
        assert counted is not None and 0 < counted <= len(NODES) * 93.0 * (time.time() - started + 2.0)
    finally:
        await monitor.stop()
        await runner.cleanup()
