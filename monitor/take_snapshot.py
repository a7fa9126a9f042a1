"""`infertop snapshot`: collect for one window, evaluate once, return the Snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from infertop.collectors.process.stopping import Stop
from infertop.collectors.safe_text import inert_text
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.source import Source
from infertop.layouts.model import Layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot

FIRST_READING_POLL_S = 0.05  # how often the first reading is looked for
PROGRESS_EVERY_S = 0.5  # how often a progress callback is told


@dataclass(frozen=True)
class Progress:
    """Where a snapshot's collection stands, for a progress line."""

    nodes: int  # nodes the layout names
    answered: int  # of which at least one reading (good or an error) came in
    elapsed_s: float  # of the window; 0 until the first reading (the window counts from it)
    window_s: float  # the whole wait, window and the rates' two readings included
    waited_s: float  # since the collection started


def progress_line(p: Progress) -> str:
    """"reading 16 nodes — 6 of 10 s" (before any answer: "waiting for a first answer, 3 s")."""
    head = f"reading {p.nodes} node{'s' if p.nodes != 1 else ''}"
    if not p.answered:
        return f"{head} — waiting for a first answer, {p.waited_s:.0f} of {p.window_s:.0f} s"
    return f"{head} — {p.elapsed_s:.0f} of {p.window_s:.0f} s"


def nothing_read(snapshot: Snapshot) -> str | None:
    """None when some node was read; else one line saying so, with the first reason
    ("no node could be read: 16 nodes, decode-01: connection refused")."""
    if not snapshot.nodes or any(n.age_s is not None for n in snapshot.nodes):
        return None
    count = len(snapshot.nodes)
    first = next((n for n in snapshot.nodes if n.error), None)
    reason = f", {first.name}: {first.error}" if first is not None else ", none answered"
    # one line, whatever the node's error said (terminal controls, newlines made inert)
    nodes = f"{count} node{'s' if count != 1 else ''}"
    return inert_text(f"no node could be read in the window: {nodes}{reason}", 300)


async def take_snapshot(
    layout: Layout,
    window_s: float | None = None,
    sources: list[Source] | None = None,
    stop: Stop | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Snapshot | None:
    """The snapshot at the end of the window; None when `stop` was set before it ended.
    `progress`: told where the collection stands every `PROGRESS_EVERY_S`."""
    window = window_s if window_s is not None else layout.cluster.window_s
    if window_s is not None:
        layout = layout.model_copy(
            update={"cluster": layout.cluster.model_copy(update={"window_s": window})}
        )
    monitor = Monitor(layout, sources=sources)
    # the window counts from the first reading, not from the start: on a loaded host the
    # sources' first answers (a scrape worker still importing, a first SSH handshake) can
    # come seconds late, and a window counted from the start then held two readings only
    heard: list[float] = []

    answered: set[str] = set()

    def first_reading(sample: NodeSample) -> None:
        answered.add(sample.node)
        if not heard:
            heard.append(sample.taken_at)

    monitor.fleet.listeners.append(first_reading)
    # a window shorter than a hold time would hide every condition: report those seen
    # but not yet held, marked pending with the time held
    monitor.verdicts.report_pending = True
    # tick through the window, not just at its end: a verdict shows only once its
    # condition has been seen to hold for the hold time (the tracker needs the ticks)
    await monitor.start(tick=True)
    try:
        # rates need two readings: wait at least two intervals even for a tiny window
        wait_s = max(window, 2 * layout.cluster.interval_s) + 0.2
        stop = stop if stop is not None else Stop()
        loop = asyncio.get_running_loop()
        started = loop.time()
        window_from: list[float] = []
        told = [started - PROGRESS_EVERY_S]
        nodes = len(monitor.state.nodes)

        def tell() -> None:
            now = loop.time()
            if progress is None or now - told[0] < PROGRESS_EVERY_S:
                return
            told[0] = now
            elapsed = now - window_from[0] if window_from else 0.0
            progress(Progress(nodes, len(answered), min(elapsed, wait_s), wait_s, now - started))

        # nothing heard within a whole window: the snapshot says so now (unreachable nodes)
        give_up_at = started + wait_s
        while not heard and loop.time() < give_up_at:
            tell()
            if await stop.sleep(FIRST_READING_POLL_S):
                return None
        if heard:
            window_from.append(loop.time())
            end = window_from[0] + wait_s
            while (left := end - loop.time()) > 0:
                tell()
                if await stop.sleep(min(left, PROGRESS_EVERY_S)):
                    return None
        return monitor.tick()
    finally:
        await monitor.stop()
