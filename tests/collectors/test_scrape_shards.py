"""The scrape source split over worker processes (collectors.sources.scrape_shards), against real
HTTP servers on loopback and real worker processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from aiohttp import web

from infertop.collectors.pages.profiles import BUNDLED_PROFILES
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.registry import build_sources
from infertop.collectors.sources.scrape import Endpoint, ScrapeSource
from infertop.collectors.sources.scrape_shards import (
    MAX_FAILED_STARTS,
    ShardedScrapeSource,
    WorkersSettingError,
    scrape_workers,
    shard_of,
)
from infertop.collectors.sources.scrape_worker import WORKER_NICENESS
from infertop.layouts import LayoutError, parse_layout
from tests.support.waiting import until, until_async

FIXTURES = Path(__file__).parent.parent / "fixtures" / "exposition"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pages() -> Iterator[str]:
    """A real HTTP server (aiohttp, in a thread of its own) serving the bundled vLLM, dcgm
    and node_exporter pages at /<node>/<page>/metrics; its base URL."""
    texts = {name: (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")
             for name in ("vllm_v1", "dcgm", "node_exporter")}
    ready: list[str] = []
    stop = threading.Event()

    async def serve() -> None:
        async def page(request: web.Request) -> web.Response:
            return web.Response(text=texts[request.match_info["name"]], content_type="text/plain")

        app = web.Application()
        app.router.add_get("/{node}/{name}/metrics", page)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        ready.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    until(lambda: ready, 10, "the page server to start")
    yield ready[0]
    stop.set()
    thread.join(5)


def targets(base: str, nodes: int) -> dict[str, list[Endpoint]]:
    return {
        f"n{i:02d}": [
            Endpoint(f"{base}/n{i:02d}/vllm_v1/metrics", BUNDLED_PROFILES["vllm"]),
            Endpoint(f"{base}/n{i:02d}/dcgm/metrics"),
            Endpoint(f"{base}/n{i:02d}/node_exporter/metrics"),
        ]
        for i in range(nodes)
    }


class Collected:
    def __init__(self) -> None:
        self.samples: list[NodeSample] = []
        self.rounds = 0

    def emit(self, sample: NodeSample) -> None:
        self.samples.append(sample)

    def nodes_since(self, at: float) -> set[str]:
        return {s.node for s in self.samples if s.taken_at >= at and s.error is None}


def test_how_many_workers() -> None:
    # a small cluster, or two cores: the monitor reads the pages itself (measured)
    assert scrape_workers(60, cores=16, setting="") == 0
    assert scrape_workers(384, cores=2, setting="") == 0
    # leaving two cores to the monitor and a viewer, one worker per 256 pages
    assert scrape_workers(384, cores=4, setting="") == 2
    assert scrape_workers(384, cores=3, setting="") == 1
    assert scrape_workers(3000, cores=8, setting="") == 6
    # the setting wins, and never more workers than pages
    assert scrape_workers(384, cores=2, setting="3") == 3
    assert scrape_workers(2, cores=2, setting="8") == 2
    assert scrape_workers(384, cores=16, setting="0") == 0
    for bad in ("-1", "two", "1.5"):
        with pytest.raises(WorkersSettingError, match="not a whole number"):
            scrape_workers(384, cores=4, setting=bad)


def test_a_node_keeps_its_worker() -> None:
    names = [f"decode-{i:02d}" for i in range(128)]
    first = [shard_of(n, 4) for n in names]
    assert first == [shard_of(n, 4) for n in names]  # no salted hash: the same every run
    assert set(first) == {0, 1, 2, 3}


def test_bad_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    layout = parse_layout('[[nodes]]\nname = "a"\nmetrics = ["http://127.0.0.1:1/metrics"]\n')
    monkeypatch.setenv("INFERTOP_SCRAPE_WORKERS", "lots")
    with pytest.raises(LayoutError, match="INFERTOP_SCRAPE_WORKERS: 'lots' is not a whole number"):
        build_sources(layout)
    monkeypatch.setenv("INFERTOP_SCRAPE_WORKERS", "1")
    (source,) = build_sources(layout)
    assert isinstance(source, ShardedScrapeSource)
    monkeypatch.setenv("INFERTOP_SCRAPE_WORKERS", "0")
    (source,) = build_sources(layout)
    assert type(source) is ScrapeSource


def test_the_cli_says_so_and_exits_2(tmp_path: Path) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text('[[nodes]]\nname = "a"\nmetrics = ["http://127.0.0.1:1/metrics"]\n')
    out = subprocess.run(
        [sys.executable, "-m", "infertop", "snapshot", "--layout", str(layout), "--window", "1"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "INFERTOP_SCRAPE_WORKERS": "x"},
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1].endswith("INFERTOP_SCRAPE_WORKERS: 'x' is not a whole number ≥ 0 "
                                                         "(0: no worker processes)")
    assert "Traceback" not in out.stderr


async def test_workers_read_every_node_and_say_when_the_round_is_in(pages: str) -> None:
    source = ShardedScrapeSource(targets(pages, 12), interval_s=0.5, workers=3)
    assert len(source.jobs) == 3
    got = Collected()
    rounds: list[tuple[float, float]] = []
    source.round_listeners.append(lambda s: rounds.append((s.round_started_at or 0, s.round_finished_at or 0)))
    start = time.time()
    task = asyncio.create_task(source.run(got.emit))
    try:
        await until_async(lambda: len(got.nodes_since(start)) == 12 and len(rounds) >= 2, 20, every_s=0.1)
        pids = [p for p in source.worker_pids if p is not None]
        assert len(pids) == 3 and os.getpid() not in pids
        # throughput work: a worker yields the CPU to the monitor and its viewers
        assert {psutil.Process(p).nice() for p in pids} == {min(os.nice(0) + WORKER_NICENESS, 19)}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await source.close()
    sample = next(s for s in got.samples if s.node == "n00" and s.error is None)
    # the whole sample crossed the pipe: engine, GPUs and NICs, as read in-process
    here = ScrapeSource(targets(pages, 1), interval_s=0.5)
    try:
        direct = await here.read_node("n00", 5.0)
    finally:
        await here.close()
    assert sample.engine is not None and sample.gpus and sample.nics
    timing = {"taken_at", "received_at"}
    assert sample.model_dump(exclude=timing) == direct.model_dump(exclude=timing)
    assert all(s.error is None for s in got.samples)
    # a round is in when every worker's is: its start is the earliest worker's
    assert all(finished >= started for started, finished in rounds)
    # and the workers are gone with the source
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_a_killed_worker_is_started_again_and_blames_no_node(pages: str) -> None:
    source = ShardedScrapeSource(targets(pages, 6), interval_s=0.5, workers=2)
    got = Collected()
    task = asyncio.create_task(source.run(got.emit))
    try:
        await until_async(lambda: len(got.nodes_since(0)) == 6, 20, every_s=0.1)
        victim = source.worker_pids[0]
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        killed_at = time.time()
        await until_async(lambda: source.worker_pids[0] not in (None, victim), 20, every_s=0.1)
        await until_async(lambda: len(got.nodes_since(killed_at + 0.5)) == 6, 20, every_s=0.1)
        assert source.restarts == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert all(s.error is None for s in got.samples)


async def test_workers_that_cannot_start_leave_the_monitor_reading(pages: str) -> None:
    source = ShardedScrapeSource(targets(pages, 4), interval_s=0.5, workers=2)
    source.worker_command = (sys.executable, "-c", "import sys; sys.exit(3)")
    got = Collected()
    task = asyncio.create_task(source.run(got.emit))
    try:
        # each worker fails MAX_FAILED_STARTS times, a second apart; then its nodes are read here
        await until_async(lambda: len(got.nodes_since(0)) == 4, 10 + 2 * MAX_FAILED_STARTS, every_s=0.1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert all(s.error is None for s in got.samples)


def test_a_worker_outlives_no_monitor(tmp_path: Path, pages: str) -> None:
    """`infertop record` killed with SIGKILL: its workers see their stdin close and exit."""
    layout = tmp_path / "l.toml"
    nodes = "".join(
        f'[[nodes]]\nname = "n{i}"\nmetrics = ["{pages}/n{i}/dcgm/metrics"]\n' for i in range(3)
    )
    layout.write_text(nodes)
    env = {**os.environ, "INFERTOP_SCRAPE_WORKERS": "1", "INFERTOP_STATE_DIR": str(tmp_path / "state")}
    monitor = subprocess.Popen(
        [sys.executable, "-m", "infertop", "record", "--layout", str(layout), "--record",
         str(tmp_path / "r.sqlite"), "-q"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        workers: list[psutil.Process] = until(
            lambda: [c for c in psutil.Process(monitor.pid).children()
                     if "infertop.collectors.sources.scrape_worker" in " ".join(c.cmdline())],
            30, "a scrape worker to start", every_s=0.2, ignore=(psutil.Error,))
        monitor.kill()
        monitor.wait(10)
        _gone, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive
    finally:
        if monitor.poll() is None:
            monitor.kill()
