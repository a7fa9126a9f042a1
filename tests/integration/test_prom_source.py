"""The `prom` source against a real Prometheus scraping real (simulated) exporters."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import ClientSession, web

import infertop.collectors.sources.prom as prom_module
from infertop.cli.snapshot import failing_verdicts
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.prom import PromSource
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import NodeView, Snapshot
from tests.support.prometheus_server import PrometheusServer, SimNode, SimRates, Target, prometheus_available
from tests.support.waiting import until, until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

NODES = ("decode-01", "decode-02")


@pytest.fixture(scope="module")
def sim_nodes() -> Iterator[list[SimNode]]:
    # decode-03 is scraped too but listed only by the test that stops it
    nodes = [SimNode(n).start() for n in (*NODES, "decode-03")]
    yield nodes
    for n in nodes:
        n.stop()


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory, sim_nodes: list[SimNode]) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [n.target() for n in sim_nodes])
    server.start()
    server.wait_for_series("vllm:generation_tokens_total", len(sim_nodes))
    yield server
    server.stop()


WINDOW_S = 4.0  # the layout's window_s
FULL_WINDOW_S = WINDOW_S + 1.0  # and one interval_s


def layout_text(url: str, extra_prom: str = "", extra_nodes: str = "", nodes: tuple[str, ...] = NODES) -> str:
    listed = "".join(f'\n[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n' for n in nodes)
    return f"""
[cluster]
name = "prom-test"
interval_s = 1.0
window_s = 4.0

[pricing]
gpu_hour_usd = 2.0

[thresholds]
# Prometheus' figures are up to one scrape (1 s) older than the poll that reads them
stale_intervals = 4
unreachable_intervals = 8

[prometheus]
url = "{url}"
backfill_s = 0
{extra_prom}
{listed}
{extra_nodes}
"""


def readings_span(monitor: Monitor, names: tuple[str, ...], span_s: float) -> bool:
    """Every named node's readings of every source it has span `span_s` seconds."""
    nodes = monitor.state.nodes
    return all(
        name in nodes and bool(nodes[name].by_source)
        and all(ring[-1].taken_at - ring[0].taken_at >= span_s for ring in nodes[name].by_source.values())
        for name in names
    )


async def run_monitor(monitor: Monitor, span_s: float, names: tuple[str, ...] = NODES) -> Snapshot:
    """The monitor's frame once every node's readings span `span_s` (FULL_WINDOW_S: the 4 s
    rate window and one interval more, full whatever the machine's load)."""
    await monitor.start(tick=False)
    try:
        await until_async(lambda: readings_span(monitor, names, span_s), 60, f"{span_s} s of readings of every node")
        return monitor.tick()
    finally:
        await monitor.stop()


def by_name(snapshot: Snapshot) -> dict[str, NodeView]:
    return {n.name: n for n in snapshot.nodes}


def rate_tolerance(prom: PrometheusServer) -> float:
    """How far a rate from Prometheus' counters may lie from the exporter's own: Prometheus
    stamps a scrape when it starts it, and the exporter computes its counters up to the
    scrape's duration later (in this busy test process, waiting for the GIL: seen 52 ms
    apart at the window's two ends, 1.3 % of a 4 s window, with make bench beside the
    suite). 1 % plus the longest scrape over the window's length."""
    longest = max(float(r["value"][1]) for r in prom.query("max_over_time(scrape_duration_seconds[1m])"))
    return 0.01 + longest / WINDOW_S


async def test_figures_equal_the_exporters_rates(prom: PrometheusServer) -> None:
    monitor = Monitor(parse_layout(layout_text(prom.url)))
    snapshot = await run_monitor(monitor, FULL_WINDOW_S)
    rel = rate_tolerance(prom)
    nodes = by_name(snapshot)
    for name in NODES:
        node = nodes[name]
        assert node.status == "ok", node
        assert node.sources == ["prom:engine", "prom:gpu", "prom:node"]
        engine = node.engine
        assert engine is not None
        # rates derived from Prometheus' raw counters equal the exporters' own rates
        assert engine.decode_steps_per_s == pytest.approx(40.0, rel=rel)
        assert engine.draft_acceptance == pytest.approx(63.0 / 90.0, rel=0.01)
        assert engine.mean_acceptance_length == pytest.approx(1 + 63.0 / 30.0, rel=0.01)
        # per draft position: Δaccepted[i] ÷ Δdrafts, from the per-position counters
        assert engine.acceptance_by_position == pytest.approx([27.0 / 30, 21.0 / 30, 15.0 / 30], rel=0.01)
        [rank] = engine.ranks or []
        assert rank.acceptance_by_position == pytest.approx(engine.acceptance_by_position, rel=0.01)
        assert engine.accepted_tokens_per_s == pytest.approx(93.0, rel=rel)
        assert engine.full_acceptance_tokens_per_s == pytest.approx(30.0 + 90.0, rel=rel)
        assert engine.prompt_tokens_per_s == pytest.approx(400.0, rel=rel)
        assert (engine.requests_running, engine.requests_waiting, engine.kv_cache_usage) == (12, 3, 0.42)
        # the scoreboard: buckets summed per node and `le` on the server, deltas here
        assert engine.latency_bounds_s["itl_p50"] == (0.025, 0.05)
        assert 0.025 <= (engine.itl_p99_s or 0) <= 0.05
        assert engine.preemptions_per_s == pytest.approx(0.5, rel=rel)
        assert [g.index for g in node.gpus] == list(range(8))
        gpu3 = node.gpus[3]
        assert (gpu3.util_pct, gpu3.power_w, gpu3.temp_c, gpu3.sm_clock_mhz) == (84.0, 615.5, 63.0, 1980.0)
        assert gpu3.mem_used_bytes == 70003 * 1024 * 1024
        # used + free + the driver's reserve, as the direct read counts it
        assert gpu3.mem_total_bytes == (70003 + 11000 + 512) * 1024 * 1024
        assert gpu3.name == "NVIDIA H200"
        # dcgm-exporter's profiling fields: real activity beside util, the idle verdict's basis
        assert gpu3.sm_active_pct == pytest.approx(61.0) and gpu3.tensor_active_pct == pytest.approx(40.0)
        assert node.idle_basis == "sm_active"
        [eth0] = node.nics  # the loopback device is filtered out on the server
        assert eth0.name == "eth0" and eth0.state == "up" and eth0.speed_gbps == pytest.approx(400.0)
        assert eth0.rx_bytes_per_s == pytest.approx(5e9, rel=rel)
        assert eth0.tx_bytes_per_s == pytest.approx(2e9, rel=rel)
        assert node.host is not None and node.host.mem_used_bytes == int(0.5e12)
        assert node.cost_per_hour_usd == pytest.approx(16.0)
        assert node.idle_fraction == 0.0


async def test_backfill_emits_history_oldest_first(prom: PrometheusServer) -> None:
    layout = parse_layout(layout_text(prom.url).replace("backfill_s = 0", "backfill_s = 60"))
    source = PromSource(layout.prometheus, list(NODES), 1.0, history=600)  # type: ignore[arg-type]
    # Prometheus holds a few seconds of history of every target (the backfill reads it)
    until(lambda: min(float(r["value"][1]) for r in prom.query("count_over_time(up[60s])")) >= 5, 60,
          "5 scrapes of every target in Prometheus", every_s=0.2)
    got: list[NodeSample] = []
    try:
        count = await source.backfill(got.append)
        # a scrape that lands while the range query runs is history too: the bound is when
        # the backfill returned, not when it was called
        ended = time.time()
        assert count == len(got) > 0
        times = [s.taken_at for s in got]
        assert times == sorted(times) and times[-1] <= ended
        for name in NODES:
            for tier in ("prom:engine", "prom:gpu", "prom:node"):
                mine = [s for s in got if s.node == name and s.source == tier]
                assert len(mine) >= 3, (name, tier)
        # the first live poll continues after the history, it does not repeat it: once
        # Prometheus has scraped every target again
        newest = max(times)
        await until_async(lambda: min(float(r["value"][1]) for r in prom.query("timestamp(up)")) > newest, 30,
                          "a scrape of every target after the history", every_s=0.2)
        live = await source.poll()
        last = {(s.node, s.source): s.taken_at for s in got}
        assert live and all(s.taken_at > last[(s.node, s.source)] for s in live)
    finally:
        await source.close()


async def test_one_target_down_leaves_the_others_alone(
    prom: PrometheusServer, sim_nodes: list[SimNode]
) -> None:
    extra = sim_nodes[-1]  # decode-03: scraped by the same Prometheus, stopped here
    layout = parse_layout(layout_text(prom.url, nodes=(*NODES, extra.name)))
    monitor = Monitor(layout)
    await monitor.start(tick=False)
    try:
        await until_async(lambda: by_name(monitor.tick())[extra.name].status == "ok", 30, f"{extra.name} ok",
                          every_s=0.25)
        extra.stop()
        def gone_with_error() -> bool:
            node = by_name(monitor.tick())[extra.name]
            return node.status != "ok" and node.error is not None

        await until_async(gone_with_error, 30, f"{extra.name} gone", every_s=0.25)
        nodes = by_name(monitor.tick())
        gone = nodes[extra.name]
        assert gone.status in ("error", "stale", "unreachable")
        assert gone.error is not None and f"no fresh series for {extra.name}" in gone.error
        assert gone.engine is not None  # its last figures stay, with their age
        assert all(nodes[n].status == "ok" for n in NODES)
    finally:
        await monitor.stop()


async def test_prometheus_stopped_then_restarted(tmp_path: Path, sim_nodes: list[SimNode]) -> None:
    """A backend down is one finding, on the backend: its nodes are unknown (never
    unreachable or in error on their own), `--fail-on critical` names it once; restarted,
    every node comes back by itself."""
    server = PrometheusServer(tmp_path, [n.target() for n in sim_nodes[:2]])
    server.start()
    server.wait_for_series("vllm:generation_tokens_total", 2)
    # a node read by another source (this machine) must not notice Prometheus' trouble
    text = layout_text(server.url, extra_nodes='[[nodes]]\nname = "here"\nlocal = true\nnode_hour_usd = 0.0\n')
    monitor = Monitor(parse_layout(text))
    await monitor.start(tick=False)
    try:
        await until_async(lambda: by_name(monitor.tick())["decode-01"].status == "ok", 30, "decode-01 ok",
                          every_s=0.25)
        server.stop()
        await until_async(lambda: all(by_name(monitor.tick())[n].status != "ok" for n in NODES), 30,
                          "every node to notice Prometheus gone", every_s=0.25)
        # past the unreachable threshold (8 intervals): still unknown, never unreachable
        def past_unreachable() -> bool:
            return all((by_name(monitor.tick())[n].age_s or 0) > 9.0 for n in NODES)

        await until_async(past_unreachable, 30, "every node's age past unreachable", every_s=0.5)
        snapshot = monitor.tick()
        nodes = by_name(snapshot)
        for name in NODES:
            assert nodes[name].status == "unknown", nodes[name]
            assert nodes[name].error == f"backend down: prometheus {server.url}: connection refused"
            assert nodes[name].verdicts == []
            assert nodes[name].engine is not None and nodes[name].age_s is not None
        assert nodes["here"].status == "ok"
        [backend] = snapshot.backends
        assert (backend.status, backend.error, backend.nodes) == ("down", "connection refused", len(NODES))
        assert backend.note == f"backend down — prometheus {server.url}: connection refused: 2 nodes unknown"
        assert failing_verdicts(snapshot, "critical") == [f"backend prometheus {server.url}: down"]
        server.start()  # same port, same data: recovery needs no user action
        said: list[str] = []

        def recovered() -> bool:
            # nothing false on the way back: until its nodes are scraped again they wait for
            # it (unknown), never stale or unreachable though their age is past both
            snapshot = monitor.tick()
            nodes = by_name(snapshot)
            assert all(nodes[n].status in ("ok", "unknown") for n in NODES), nodes
            # what the header said once the backend answered again (its down notes came before)
            said.extend(b.note for b in snapshot.backends if b.note and b.status != "down")
            return all(nodes[n].status == "ok" for n in NODES)

        await until_async(recovered, 30, "recovery", every_s=0.25)
        snapshot = monitor.tick()
        nodes = by_name(snapshot)
        assert all(nodes[n].status == "ok" and nodes[n].error is None for n in NODES), nodes
        assert [b.status for b in snapshot.backends] == ["ok"]
        # said in the header while it settled (the first frames after it answered again): that
        # it is back, or that its newest samples are old until it scrapes again; never down
        settling = ("back after", "restarted", "its newest sample is")
        assert all(any(word in n for word in settling) for n in said), said
    finally:
        await monitor.stop()
        server.stop()


async def test_a_config_reload_shows_nothing_false(tmp_path: Path, sim_nodes: list[SimNode]) -> None:
    """A Prometheus whose config is reloaded mid-session (its targets relabelled: every
    series starts again, its scrape loops restart up to an interval apart): no node is
    ever stale, unreachable or in error for it (issue 48: a snapshot ~10 s after a reload
    showed healthy nodes stale), and every node reads on."""
    server = PrometheusServer(tmp_path, [n.target() for n in sim_nodes[:2]])
    server.start()
    server.wait_for_series("vllm:generation_tokens_total", 2)
    monitor = Monitor(parse_layout(layout_text(server.url)))
    await monitor.start(tick=False)
    try:
        await until_async(lambda: all(n.status == "ok" for n in monitor.tick().nodes), 30, "every node ok",
                          every_s=0.25)
        server.targets = [Target(t.address, {**t.labels, "rack": "r1"}) for t in server.targets]
        server.write_config()
        assert server.proc is not None
        server.proc.send_signal(signal.SIGHUP)
        ticks_after = 0

        def read_on_after_the_reload() -> bool:
            nonlocal ticks_after
            nodes = by_name(monitor.tick())
            assert all(nodes[n].status in ("ok", "unknown") for n in NODES), nodes
            if server.series_count('vllm:generation_tokens_total{rack="r1"}') >= 2:
                ticks_after += 1
            return ticks_after >= 12  # a few intervals past the relabelled series' first scrape

        await until_async(read_on_after_the_reload, 60, "the reload and a few ticks after it", every_s=0.5)
        nodes = by_name(monitor.tick())
        assert all(nodes[n].status == "ok" for n in NODES), nodes
        for name in NODES:  # the figures read on, across the series' new identity
            engine = nodes[name].engine
            assert engine is not None and engine.requests_running == SimRates().running
            assert engine.decode_steps_per_s == pytest.approx(SimRates().steps_per_s, rel=0.1)
    finally:
        await monitor.stop()
        server.stop()


async def start_proxy(upstream: str, token: str, delay_s: float = 0.0) -> tuple[web.AppRunner, str]:
    """A reverse proxy in front of Prometheus that demands `Authorization: Bearer <token>`."""
    session = ClientSession()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {token}":
            return web.Response(status=401, text="unauthorized")
        await asyncio.sleep(delay_s)
        async with session.get(upstream + request.path_qs) as resp:
            return web.Response(status=resp.status, body=await resp.read(),
                                content_type=resp.content_type)

    async def close_session(_app: web.Application) -> None:
        await session.close()

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    app.on_cleanup.append(close_session)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def test_bad_token_is_a_clear_error(prom: PrometheusServer, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    secret = "s3cret-token-value"
    runner, url = await start_proxy(prom.url, secret)
    try:
        layout = parse_layout(layout_text(url, 'token_env = "PROM_TEST_TOKEN"'))
        assert layout.prometheus is not None

        said: list[str | None] = []  # the backend's error after each poll

        async def one_poll() -> list[NodeSample]:
            source = PromSource(layout.prometheus, list(NODES), 1.0)  # type: ignore[arg-type]
            try:
                samples = list(await source.poll())
                [backend] = source.backend_states()
                assert backend.nodes == set(NODES)
                said.append(backend.error)
                return samples
            finally:
                await source.close()

        monkeypatch.delenv("PROM_TEST_TOKEN", raising=False)
        missing = await one_poll()
        assert missing == [] and said == [
            "environment variable PROM_TEST_TOKEN (token_env) is not set"
        ]
        monkeypatch.setenv("PROM_TEST_TOKEN", "wrong-" + secret)
        rejected = await one_poll()
        assert rejected == [] and said[-1] == "rejected the credentials (HTTP 401)"
        monkeypatch.setenv("PROM_TEST_TOKEN", secret)
        accepted = await one_poll()
        assert accepted and all(s.ok for s in accepted)
        # the same token read from a file
        token_file = tmp_path / "token"
        token_file.write_text(secret + "\n")
        layout = parse_layout(layout_text(url, f'token_file = "{token_file}"'))
        assert all(s.ok for s in await one_poll())
        assert not [e for e in said if e is not None and secret in e]
    finally:
        await runner.cleanup()


async def test_slow_prometheus_times_out(prom: PrometheusServer, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, url = await start_proxy(prom.url, "t", delay_s=3.0)
    monkeypatch.setenv("PROM_SLOW_TOKEN", "t")
    try:
        layout = parse_layout(layout_text(url, 'token_env = "PROM_SLOW_TOKEN"\ntimeout_s = 0.5'))
        source = PromSource(layout.prometheus, list(NODES), 1.0)  # type: ignore[arg-type]
        try:
            samples = await source.poll()  # the proxy answers after 3 s: far too late
            assert samples == []  # said on the backend, not on each node
            [backend] = source.backend_states()
            # a query's timeout (0.5 s) or the round's (two waves of queries: 1 s)
            assert backend.error in ("timed out after 0.5 s", "timed out after 1 s"), backend.error
            assert backend.nodes == set(NODES)
        finally:
            await source.close()
    finally:
        await runner.cleanup()


async def test_discover_finds_the_nodes(prom: PrometheusServer) -> None:
    text = layout_text(prom.url, 'discover = true\ndiscover_role = "decode"', nodes=())
    monitor = Monitor(parse_layout(text))
    snapshot = await run_monitor(monitor, 2.0)  # a few readings: discovered, with their GPUs
    nodes = by_name(snapshot)
    assert set(NODES) <= set(nodes)
    for name in NODES:
        assert nodes[name].status == "ok"
        assert nodes[name].role == "decode"
        assert nodes[name].cost_per_hour_usd == pytest.approx(16.0)  # 8 GPUs seen × $2


async def test_unknown_node_label_says_so(prom: PrometheusServer) -> None:
    text = layout_text(prom.url, nodes=("decode-01", "no-such-node"))
    source = PromSource(parse_layout(text).prometheus, ["decode-01", "no-such-node"], 1.0)  # type: ignore[arg-type]
    try:
        samples = await source.poll()
    finally:
        await source.close()
    errors = {s.node: s.error for s in samples if not s.ok}
    assert errors == {
        "no-such-node": f"prometheus {prom.url}: no series with instance=no-such-node (check node_label, selector)"
    }
    assert {s.node for s in samples if s.ok} == {"decode-01"}


async def test_prom_equals_the_scrape_source_for_the_same_nodes(
    prom: PrometheusServer, sim_nodes: list[SimNode]
) -> None:
    scraped_nodes = "".join(
        f'\n[[nodes]]\nname = "{n.name}"\nrole = "decode"\ngpus = 8\n'
        f'metrics = ["http://127.0.0.1:{n.port}/metrics"]\n'
        f'engine = {{ url = "http://127.0.0.1:{n.port}/metrics", profile = "vllm" }}\n'
        for n in sim_nodes[:2]
    )
    scrape_layout = parse_layout(layout_text(prom.url, nodes=()) + scraped_nodes)
    via_prom, via_scrape = await asyncio.gather(
        run_monitor(Monitor(parse_layout(layout_text(prom.url))), FULL_WINDOW_S),
        run_monitor(Monitor(scrape_layout), FULL_WINDOW_S),
    )
    a, b = by_name(via_prom), by_name(via_scrape)
    for name in NODES:
        assert b[name].sources != a[name].sources  # really two different paths
        ea, eb = a[name].engine, b[name].engine
        assert ea is not None and eb is not None
        for field in ("draft_acceptance", "requests_running", "kv_cache_usage", "acceptance_by_position"):
            assert getattr(ea, field) == pytest.approx(getattr(eb, field), rel=0.01), field
        # Rates: each source times its readings itself (Prometheus its scrape start, the
        # scrape source the middle of its request), so on a loaded machine the two differ by
        # the jitter of those clocks over the 4 s window (CI saw 40.02 vs 40.75 once); both
        # must be near the rate the node was driven at and near each other.
        assert ea.decode_steps_per_s == pytest.approx(SimRates().steps_per_s, rel=0.05)
        assert eb.decode_steps_per_s == pytest.approx(SimRates().steps_per_s, rel=0.05)
        for field in ("decode_steps_per_s", "accepted_tokens_per_s", "full_acceptance_tokens_per_s"):
            assert getattr(ea, field) == pytest.approx(getattr(eb, field), rel=0.05), field
        for gpu_field in ("util_pct", "mem_total_bytes", "sm_active_pct", "sm_occupancy_pct",
                          "tensor_active_pct", "dram_active_pct"):
            assert [getattr(g, gpu_field) for g in a[name].gpus] == [getattr(g, gpu_field) for g in b[name].gpus]
        assert a[name].idle_basis == b[name].idle_basis == "sm_active"
        assert a[name].cost_per_hour_usd == b[name].cost_per_hour_usd


async def test_latency_histograms_read_every_few_ticks_past_their_budget(
    prom: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past LATENCY_SERIES_PER_TICK bucket series a tick, the histograms are read on one
    tick in a few only, never so rarely that the window loses its readings: at a 1 s
    interval and a 12 s window, every 4th tick (collectors/sources/scrape.py keeps 3 a window)."""
    monkeypatch.setattr(prom_module, "LATENCY_SERIES_PER_TICK", 1)  # the 2 nodes' ITL buckets are past it
    layout = parse_layout(layout_text(prom.url))
    source = PromSource(layout.prometheus, list(NODES), 1.0, window_s=12.0)  # type: ignore[arg-type]
    asked: list[bool] = []
    try:
        for _ in range(9):
            asked.append(source.latency_this_tick())
            newest = max(float(r["value"][1]) for r in prom.query("timestamp(up)"))
            samples = await source.poll()
            engines = [s.engine for s in samples if s.engine is not None]
            assert len(engines) == len(NODES)  # every tick reads every engine's counters
            assert all((e.latency_buckets is not None) == asked[-1] for e in engines), (asked, [e.latency_buckets for e in engines])
            # the next tick reads a newer scrape (an engine sample is sent once a scrape)
            await until_async(lambda t=newest: min(float(r["value"][1]) for r in prom.query("timestamp(up)")) > t,
                              30, "the next scrape of every target", every_s=0.1)
    finally:
        await source.close()
    # the first tick finds how many there are; from then on one tick in four
    assert source.latency_every() == 4
    assert asked == [True, False, False, True, False, False, False, True, False]


def test_engine_latency_per_rank_only_on_small_fleets() -> None:
    """Per data-parallel engine, the histograms would be 8 times the node's; past
    RANK_LATENCY_MAX_NODES only the node's are asked for (each engine's counters still are)."""
    layout = parse_layout(layout_text("http://127.0.0.1:9"))
    small = PromSource(layout.prometheus, list(NODES), 1.0)  # type: ignore[arg-type]
    many = [f"decode-{i:04d}" for i in range(prom_module.RANK_LATENCY_MAX_NODES + 1)]
    large = PromSource(layout.prometheus, many, 1.0)  # type: ignore[arg-type]
    keys = {name: {q.key for q in src.queries("engine")} for name, src in (("small", small), ("large", large))}
    assert "rank:latency:itl" in keys["small"] and "rank:latency:itl" not in keys["large"]
    assert {"latency:itl", "rank:generation_tokens_total"} <= keys["large"]
    assert not [k for k in {q.key for q in small.queries("engine", latency=False)} if "latency:" in k]
