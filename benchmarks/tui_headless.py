"""The TUI under a 128-node × 8-GPU cluster, headless, in its own process (for bench_tui).

    python -m benchmarks.tui_headless --nodes 128 --seconds 40 [--layout FILE]

Without `--layout` the frames come from the demo's simulated cluster made in-process
(`benchmarks.synthetic.SimSource`), so the figures are the TUI's own work: the Monitor
tick, the session record, the table diff and the paint. With `--layout` (the file
`infertop demo --serve-only --layout-out` writes) the real sources run: the process then
also pays for scraping and parsing 3 × nodes exporter pages a second. With `--attach`
as well, the app is a viewer of the monitor already running for that layout (`infertop
record`), as `infertop --layout F` runs it: frames arrive over the monitor's socket and
the process pays for reading them and drawing, nothing else.

The app is the real `InfertopApp` (every registered panel, the session record on as by
default), run with `App.run_test()` (headless). Headless Textual composes every update
but skips turning it into terminal bytes; `BenchApp._display` does that step too and
throws the bytes away, so the paint costs what it costs on a terminal.

Prints one JSON object: first full frame (from process start), per-frame apply + paint
times, CPU seconds and resident memory over the steady part of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# "process start" for the first frame: when the parent launched us, else as early as we can
T0_WALL = float(os.environ.get("INFERTOP_BENCH_T0") or time.time())

from rich.console import RenderableType  # noqa: E402
from textual.screen import Screen  # noqa: E402

import infertop.tui.app as tui_app  # noqa: E402
from benchmarks.synthetic import SimSource, demo_layout  # noqa: E402
from infertop.collectors.process.gctune import tune_gc  # noqa: E402
from infertop.demo.scenario import SimCluster  # noqa: E402
from infertop.layouts import load_layout  # noqa: E402
from infertop.monitor.channel.client import SocketFeed  # noqa: E402
from infertop.monitor.channel.paths import socket_path  # noqa: E402
from infertop.monitor.feeds import MonitorFeed, SnapshotFeed  # noqa: E402
from infertop.monitor.record.store import Recorder  # noqa: E402
from infertop.monitor.snapshot import Snapshot  # noqa: E402
from infertop.tui.app import InfertopApp  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class BenchApp(InfertopApp):
    """The real app, timed. A frame's update = its handler (history, table diff, panels)
    plus every repaint of the screen until the next frame arrives (the paint it caused,
    including DataTable's deferred re-measure); latency = handler start → first paint."""

    # a relative CSS_PATH resolves next to the subclass: point at the app's own file
    CSS_PATH = str(Path(tui_app.__file__).with_name(str(InfertopApp.CSS_PATH)))

    def __init__(self, feed: SnapshotFeed, nodes: int) -> None:
        super().__init__(feed)
        self.nodes_expected = nodes
        self.first_full_frame_s: float | None = None
        self.apply_ms: list[float] = []
        self.paint_ms: list[float] = []
        # the same, in CPU time of the app's thread: what the update costs, not counting
        # the time the process waited for a core (other processes on a busy machine)
        self.apply_cpu_ms: list[float] = []
        self.paint_cpu_ms: list[float] = []
        self.paints: list[dict[str, float]] = []  # per frame: each repaint's kind → wall ms
        self.latency_ms: list[float] = []
        self._frame_start: float | None = None
        self._full_pending = False
        self._painting = False
        screen = self.overview  # its update timer is made on first use: wrap before that
        for name in ("_on_timer_update", "_refresh_layout"):
            setattr(screen, name, self._timed_paint(getattr(screen, name)))

    def _timed_paint(self, paint: Callable[..., None]) -> Callable[..., None]:
        kind = paint.__name__

        def timed(*args: object, **kwargs: object) -> None:
            if self._painting or not self.paint_ms:  # nested, or before the first frame
                return paint(*args, **kwargs)
            self._painting = True
            start, start_cpu = time.perf_counter(), time.thread_time()
            try:
                return paint(*args, **kwargs)
            finally:
                self._painting = False
                wall_ms = (time.perf_counter() - start) * 1e3
                self.paint_ms[-1] += wall_ms
                self.paint_cpu_ms[-1] += (time.thread_time() - start_cpu) * 1e3
                took = self.paints[-1]
                took[kind] = took.get(kind, 0.0) + wall_ms
                took[f"{kind} calls"] = took.get(f"{kind} calls", 0) + 1

        return timed

    def render_snapshot(self, snapshot: Snapshot) -> None:
        start, start_cpu = time.perf_counter(), time.thread_time()
        super().render_snapshot(snapshot)
        self.apply_ms.append((time.perf_counter() - start) * 1e3)
        self.apply_cpu_ms.append((time.thread_time() - start_cpu) * 1e3)
        self.paint_ms.append(0.0)
        self.paint_cpu_ms.append(0.0)
        self.paints.append({})
        self._frame_start = start
        if self.first_full_frame_s is None and len(snapshot.nodes) >= self.nodes_expected:
            self._full_pending = True

    def _display(self, screen: Screen[object], renderable: RenderableType | None) -> None:
        super()._display(screen, renderable)
        if renderable is None or self._batch_count:
            return
        render_segments = getattr(renderable, "render_segments", None)
        if render_segments is not None:
            # what a terminal driver would write for a compositor update; headless mode
            # skips it (duck-typed: the update's class is private to Textual)
            render_segments(self.console)
        if self._frame_start is not None:
            self.latency_ms.append((time.perf_counter() - self._frame_start) * 1e3)
            self._frame_start = None
        if self._full_pending:
            self._full_pending = False
            self.first_full_frame_s = time.time() - T0_WALL


async def measure(args: argparse.Namespace) -> dict[str, object]:
    tmp = tempfile.mkdtemp(prefix="infertop-bench-")
    if not args.attach:  # an attached viewer finds its monitor in the caller's state directory
        os.environ["INFERTOP_STATE_DIR"] = tmp
    sim: SimSource | None = None
    recorder: Recorder | None = None
    feed: SnapshotFeed
    tick_ms: list[float] = []
    if args.layout and args.attach:
        layout = load_layout(Path(args.layout))
        feed = SocketFeed(layout, socket_path(layout))
        nodes = len(layout.nodes)
    else:
        if args.layout:
            layout = load_layout(Path(args.layout))
            monitor_feed = MonitorFeed(
                layout, recorder=Recorder.open(layout, Path(tmp) / "bench.sqlite", background=True))
            nodes = len(layout.nodes)
        else:
            now = time.time()
            cluster = SimCluster(args.nodes, started_at=now - 600)
            layout = demo_layout(cluster, reservation_start=now - 3600, interval_s=args.interval)
            sim = SimSource(cluster, layout.cluster.interval_s)
            monitor_feed = MonitorFeed(layout, sources=[sim], recorder=Recorder.open(
                layout, Path(tmp) / "bench.sqlite", background=True))
            nodes = args.nodes
        # the session record is on by default in the TUI: kept on here (the feed's recorder)
        recorder = monitor_feed.monitor.recorder
        assert recorder is not None
        # Monitor.tick runs on the same event loop: time it too
        tick = monitor_feed.monitor.tick

        def timed_tick(now: float | None = None) -> Snapshot:
            start = time.perf_counter()
            try:
                return tick(now)
            finally:
                tick_ms.append((time.perf_counter() - start) * 1e3)

        monitor_feed.monitor.tick = timed_tick  # type: ignore[method-assign]
        feed = monitor_feed
    app = BenchApp(feed, nodes)
    if args.view is not None:  # the overview's main view, whatever the fleet's size
        app.overview.map_chosen = args.view == "map"
    # garbage-collector pauses by generation (ms): a full collection lands inside whatever
    # handler or paint is running, so it shows in the update times too
    gc_ms: dict[str, list[float]] = {"0": [], "1": [], "2": []}
    gc_started: list[float] = [0.0]

    def gc_timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_ms[str(info["generation"])].append((time.perf_counter() - gc_started[0]) * 1e3)

    gc.callbacks.append(gc_timer)
    async with app.run_test(size=(args.width, args.height)):
        await asyncio.sleep(args.warmup)
        for pauses in gc_ms.values():
            pauses.clear()
        frames_at_warm = len(app.apply_ms)
        cpu0, wall0 = cpu_s(), time.perf_counter()
        sim_cpu0 = sim.cpu_s if sim is not None else 0.0
        rss_max = rss_bytes()
        end = wall0 + args.seconds
        while time.perf_counter() < end:
            await asyncio.sleep(1.0)
            rss_max = max(rss_max, rss_bytes())
        cpu1, wall1 = cpu_s(), time.perf_counter()
        sim_cpu1 = sim.cpu_s if sim is not None else 0.0
        rows = app.overview.table.row_count
        cells = app.overview.fleet_map.cell_count
    if recorder is not None:
        recorder.close()
    # the last frame's paint may be cut short by the end of the run
    steady = slice(frames_at_warm, len(app.apply_ms) - 1)
    update_ms = [a + p for a, p in zip(app.apply_ms, app.paint_ms, strict=True)]
    return {
        "nodes": nodes,
        "gpus": sum(len(n.gpus) for n in app.latest_snapshot.nodes) if app.latest_snapshot else 0,
        "rows": rows,
        "cells": cells,  # nodes on the fleet map (0 while the table is the view)
        "first_full_frame_s": app.first_full_frame_s,
        "frames": len(update_ms[steady]),
        "apply_ms": app.apply_ms[steady],
        "paint_ms": app.paint_ms[steady],
        "update_ms": update_ms[steady],
        "paints": app.paints[steady],
        "update_cpu_ms": [a + p for a, p in zip(app.apply_cpu_ms, app.paint_cpu_ms, strict=True)][steady],
        "latency_ms": app.latency_ms[frames_at_warm:],
        "tick_ms": tick_ms[-len(update_ms[steady]):],
        "gc_ms": gc_ms,
        "cpu_share": (cpu1 - cpu0) / (wall1 - wall0),
        # the simulated cluster making its samples (in a real run: the sources' parsing)
        "sim_cpu_share": (sim_cpu1 - sim_cpu0) / (wall1 - wall0),
        "steady_s": wall1 - wall0,
        "rss_bytes": rss_bytes(),
        "rss_max_bytes": rss_max,
    }


def main(argv: list[str] | None = None) -> int:
    tune_gc()  # as `infertop` does at its entry point
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=128)
    p.add_argument("--layout", default=None, help="a demo layout (real sources over HTTP)")
    p.add_argument("--attach", action="store_true",
                   help="with --layout: view the monitor already running for it (infertop record)")
    p.add_argument("--warmup", type=float, default=8.0, help="seconds before measuring")
    p.add_argument("--seconds", type=float, default=40.0, help="steady-state seconds measured")
    p.add_argument("--interval", type=float, default=1.0, help="the layout's interval_s (in-process only)")
    p.add_argument("--view", choices=("table", "map"), default=None,
                   help="the overview's main view (default: by the fleet's size)")
    p.add_argument("--width", type=int, default=200)
    p.add_argument("--height", type=int, default=50)
    args = p.parse_args(argv)
    result = asyncio.run(measure(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
