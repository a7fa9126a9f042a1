"""A monitor starved on purpose blames itself, not the nodes.

Real exporters (prometheus_client registries served over HTTP by threads of this
process, answering like a loaded node: after a short delay), a real Monitor scraping
them at 0.5 s, and its event loop blocked by a callback (`time.sleep`) or hogged by
CPU-bound callbacks for several intervals — longer than the unreachable threshold.
No node may go stale, unreachable or in error for it, the snapshot must say the monitor
lagged, and a server that is truly killed must still go unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from infertop.collectors.sources.scrape import scrape_targets
from infertop.collectors.sources.scrape_shards import ShardedScrapeSource
from infertop.layouts import parse_layout
from infertop.layouts.model import Layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.prometheus_server import SimNode
from tests.support.waiting import until_async

INTERVAL_S = 0.5  # stale after 1 s, unreachable after 2.5 s
ANSWER_DELAY_S = 0.15  # a poll is on the wire for this long out of every interval
NODES = ("decode-01", "decode-02", "decode-03")


class SlowExporter:
    """One node's exporter pages (SimNode's registry) over HTTP, each answer sent
    `ANSWER_DELAY_S` after the request, from a thread of its own."""

    def __init__(self, name: str) -> None:
        self.sim = SimNode(name)
        registry = self.sim.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(ANSWER_DELAY_S)
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kill(self) -> None:
        """Gone: the port refuses connections from now on."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def exporters() -> Iterator[dict[str, SlowExporter]]:
    servers = {name: SlowExporter(name) for name in NODES}
    try:
        yield servers
    finally:
        for server in servers.values():
            with contextlib.suppress(OSError):
                server.kill()


def layout_for(servers: dict[str, SlowExporter]) -> Layout:
    nodes = "".join(
        f'[[nodes]]\nname = "{name}"\nrole = "decode"\ngpus = 8\n'
        f'metrics = ["http://127.0.0.1:{s.port}/metrics"]\n'
        f'engine = {{ url = "http://127.0.0.1:{s.port}/metrics", profile = "vllm" }}\n\n'
        for name, s in servers.items()
    )
    return parse_layout(
        f'[cluster]\nname = "lag"\ninterval_s = {INTERVAL_S}\nwindow_s = 5\n\n'
        f"[pricing]\ngpu_hour_usd = 2.0\n\n"
        # what SimNode's pages never carry is a coverage fact, not blame: acknowledged, so
        # that its `blind` verdict (held a while) cannot land inside a run a loaded machine drew out
        '[thresholds]\nblind_ignore = ["clock_events", "nvlink", "nvlink_errors", "ecc", "nic_errors"]\n\n'
        f"{nodes}"
    )


class Frames:
    def __init__(self, monitor: Monitor) -> None:
        self.all: list[Snapshot] = []
        monitor.listeners.append(self.all.append)

    async def until(self, check: Any, timeout_s: float, what: str) -> Snapshot:
        await until_async(lambda: self.all and check(self.all[-1]), timeout_s, what,
                          detail=lambda: self._statuses(self.all[-1]) if self.all else None)
        return self.all[-1]

    async def more(self, count: int, timeout_s: float = 30.0) -> None:
        """Until `count` more frames have come: that many ticks of the cadence, counted
        (a loaded machine makes them slower, never fewer)."""
        have = len(self.all)
        await until_async(lambda: len(self.all) >= have + count, timeout_s, f"{count} more frames")

    @staticmethod
    def _statuses(frame: Snapshot) -> dict[str, tuple[str, str | None]]:
        return {n.name: (n.status, n.error) for n in frame.nodes}

    def blamed(self, since: int) -> list[tuple[str, str, str, str | None]]:
        """(taken_at, node, status, error) of every node not ok in frames since `since`."""
        return [
            (f.taken_at, n.name, n.status, n.error)
            for f in self.all[since:]
            for n in f.nodes
            if n.status != "ok" or n.verdicts
        ]


def all_ok(frame: Snapshot) -> bool:
    return all(n.status == "ok" for n in frame.nodes) and len(frame.nodes) == len(NODES)


async def wait_for_poll_in_flight() -> None:
    """Until a poll is on the wire: just after a wall-clock reading instant (sources
    read at whole multiples of the interval; each answer takes ANSWER_DELAY_S)."""
    now = time.time()
    await asyncio.sleep(INTERVAL_S - now % INTERVAL_S + ANSWER_DELAY_S / 3)


async def test_a_blocked_loop_blames_the_monitor_not_the_nodes(exporters: dict[str, SlowExporter]) -> None:
    monitor = Monitor(layout_for(exporters))
    frames = Frames(monitor)
    await monitor.start()
    try:
        await frames.until(all_ok, 10, "every node answers")
        await frames.more(3)  # rates and a steady cadence
        # not lagging before the block (a loaded machine may stall the loop on its own: wait it out)
        await frames.until(lambda f: f.monitor is not None and not f.monitor.lagging, 60, "a steady cadence")
        start = len(frames.all)

        # the loop stands still for 3.5 s (7 intervals, past the 2.5 s unreachable
        # threshold) while every node's answer is on the wire
        await wait_for_poll_in_flight()
        time.sleep(3.5)  # measured: the monitor's own loop is blocked this long (the point)
        await frames.more(6)

        assert frames.blamed(start) == [], [(n.name, [v.kind for v in n.verdicts]) for f in frames.all[start:]
                                            for n in f.nodes if n.verdicts][:3]
        lagged = [f.monitor for f in frames.all[start:] if f.monitor is not None and f.monitor.lagging]
        assert lagged, "the stall was not reported"
        worst = max(lagged, key=lambda m: m.loop_stall_max_s or 0.0)
        assert worst.loop_stall_max_s is not None and worst.loop_stall_max_s >= 3.0
        assert worst.reason is not None and re.search(r"loop blocked or saturated [3-5]\.\d s", worst.reason), worst.reason
        assert worst.suggestion == "try interval_s = 1"
        json_view = frames.all[-1].to_json_dict()["monitor"]
        assert isinstance(json_view, dict) and {"lag_s", "loop_stall_max_s", "cpu_pct", "lagging"} <= set(json_view)

        # the converse, once the monitor keeps up again: a node truly gone is unreachable
        # as soon as before (5 intervals of silence, a tick's phase, the cadence's rounding)
        # (later only by what the monitor itself lost meanwhile, on a loaded test machine)
        exporters["decode-03"].kill()
        killed_at = time.time()
        await frames.until(
            lambda f: {n.name: n.status for n in f.nodes}["decode-03"] == "unreachable",
            20, "a killed node goes unreachable",
        )
        assert monitor.stall_meter is not None
        lost = monitor.stall_meter.stalled_wall_s(killed_at, time.time())
        assert time.time() - killed_at - lost < 5 * INTERVAL_S + 2 * INTERVAL_S + 0.5
    finally:
        await monitor.stop()


async def test_a_stopped_scrape_worker_blames_the_monitor_not_its_nodes(exporters: dict[str, SlowExporter]) -> None:
    # the nodes read by a worker process (collectors.sources.scrape_shards): its loop, not the
    # monitor's, is the one that stands still, here for 3.5 s (SIGSTOP: as a starved or
    # swapped-out worker), past the 2.5 s unreachable threshold, while a poll is on the wire
    layout = layout_for(exporters)
    source = ShardedScrapeSource(scrape_targets(layout), INTERVAL_S, workers=1)
    monitor = Monitor(layout, sources=[source])
    frames = Frames(monitor)
    await monitor.start()
    try:
        await frames.until(all_ok, 20, "every node answers")
        await frames.more(3)
        start = len(frames.all)
        worker = source.worker_pids[0]
        assert worker is not None
        await wait_for_poll_in_flight()
        os.kill(worker, signal.SIGSTOP)
        try:
            await asyncio.sleep(3.5)  # measured: the worker stands still this long; the monitor's loop runs
        finally:
            os.kill(worker, signal.SIGCONT)
        await frames.until(all_ok, 10, "the worker reads again")
        await frames.more(4)
        assert frames.blamed(start) == []
        assert any(f.monitor is not None and f.monitor.lagging for f in frames.all[start:]), "the lag was not said"

        # and a node truly gone is still unreachable, read by a worker
        exporters["decode-03"].kill()
        await frames.until(
            lambda f: {n.name: n.status for n in f.nodes}["decode-03"] == "unreachable",
            20, "a killed node goes unreachable",
        )
    finally:
        await monitor.stop()


def hog_cpu(loop: asyncio.AbstractEventLoop, until: float, busy_s: float, every_s: float) -> None:
    """CPU-bound callbacks on the monitor's loop: busy `busy_s` of every `every_s`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < busy_s:
        pass
    if time.monotonic() < until:
        loop.call_later(every_s - busy_s, hog_cpu, loop, until, busy_s, every_s)


async def test_a_cpu_starved_monitor_reports_its_lag_and_a_killed_node_still_goes_unreachable(
    exporters: dict[str, SlowExporter],
) -> None:
    monitor = Monitor(layout_for(exporters))
    frames = Frames(monitor)
    await monitor.start()
    loop = asyncio.get_running_loop()
    try:
        await frames.until(all_ok, 10, "every node answers")
        await frames.more(2)
        start = len(frames.all)
        # the loop is busy 0.9 s of every second for 8 s: every tick and poll runs late
        hog_cpu(loop, time.monotonic() + 8.0, busy_s=0.9, every_s=1.0)
        lagging = await frames.until(
            lambda f: f.monitor is not None and f.monitor.lagging, 5, "the lag is reported"
        )
        assert lagging.monitor is not None and lagging.monitor.cpu_pct is not None
        # a node truly gone, while the monitor is still starved
        exporters["decode-02"].kill()
        # within `until`'s 30 s: the node's reads time out and its age passes the threshold
        gone = await frames.until(
            lambda f: {n.name: n.status for n in f.nodes}["decode-02"] == "unreachable",
            30, "a killed node goes unreachable even while the monitor lags",
        )
        others = [(f.taken_at, n.name, n.status, n.error) for f in frames.all[start:] for n in f.nodes
                  if n.name != "decode-02" and n.status != "ok"]
        assert others == []
        assert [n.status for n in gone.nodes] == ["ok", "unreachable", "ok"]
    finally:
        await monitor.stop()


def test_the_monitor_composes_its_warning_and_the_fix() -> None:
    from infertop.monitor.health import health_view, suggestion

    advice = suggestion(1.0, direct_nodes=128, has_prometheus=False)
    assert advice == "try interval_s = 2 or the prom source"
    assert suggestion(1.0, direct_nodes=128, has_prometheus=True) == "try interval_s = 2"
    assert suggestion(0.5, direct_nodes=4, has_prometheus=False) == "try interval_s = 1"
    late = health_view(1.0, lag_s=1.4, stall_max_s=0.3, stalled_fraction=0.5, cpu_pct=99.6,
                       nodes_excused=0, advice=advice)
    assert (late.lagging, late.reason, late.suggestion) == (True, "1.4 s behind, CPU 100 %", advice)
    fine = health_view(1.0, lag_s=0.05, stall_max_s=0.04, stalled_fraction=0.01, cpu_pct=40.0,
                       nodes_excused=0, advice=advice)
    assert (fine.lagging, fine.reason, fine.suggestion) == (False, None, None)
    excused = health_view(1.0, lag_s=0.05, stall_max_s=0.2, stalled_fraction=0.1, cpu_pct=None,
                          nodes_excused=3, advice=advice)
    assert excused.lagging and excused.reason == "0.1 s behind, 3 nodes read late, not blamed"
    # frames drawn before their round's readings were in: the monitor is slow, says so
    behind = health_view(1.0, lag_s=0.0, stall_max_s=0.1, stalled_fraction=0.1, cpu_pct=97.0,
                         nodes_excused=0, advice=advice, rounds_late=6)
    assert behind.lagging and behind.rounds_late == 6
    assert behind.reason == "0.0 s behind, readings not in time for 6 frames, CPU 97 %"
    assert behind.suggestion == advice
    # one such frame lately is a hiccup, not a monitor that cannot keep up
    once = health_view(1.0, lag_s=0.0, stall_max_s=0.0, stalled_fraction=0.0, cpu_pct=5.0,
                       nodes_excused=0, advice=advice, rounds_late=1)
    assert (once.lagging, once.reason, once.rounds_late) == (False, None, 1)
    twice = health_view(1.0, lag_s=0.0, stall_max_s=0.0, stalled_fraction=0.0, cpu_pct=5.0,
                        nodes_excused=0, advice=advice, rounds_late=2)
    assert twice.lagging and twice.reason == "0.0 s behind, readings not in time for 2 frames, CPU 5 %"


def test_frames_drawn_without_their_round_are_counted_for_a_while() -> None:
    from infertop.monitor.health import MonitorHealth

    clock = [1000.0]
    health = MonitorHealth(1.0, wall=lambda: clock[0], cpu=lambda: 0.0)
    for k in range(3):
        health.tick_ran(1000.9 + k, 1000.9 + k, round_missed=k != 1)
    clock[0] = 1003.0
    assert health.view(None, 0, "try interval_s = 2").rounds_late == 2
    clock[0] = 1020.0  # long after: no longer lagging for them
    view = health.view(None, 0, "try interval_s = 2")
    assert view.rounds_late == 0 and not view.lagging
