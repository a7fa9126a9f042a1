"""`infertop snapshot`: collect for one window, evaluate once, return the Snapshot."""

from __future__ import annotations

import asyncio

from infertop.collectors.process.stopping import Stop
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.source import Source
from infertop.layouts.model import Layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot

FIRST_READING_POLL_S = 0.05  # how often the first reading is looked for


async def take_snapshot(
    layout: Layout,
    window_s: float | None = None,
    sources: list[Source] | None = None,
    stop: Stop | None = None,
) -> Snapshot | None:
    """The snapshot at the end of the window; None when `stop` was set before it ended."""
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

    def first_reading(sample: NodeSample) -> None:
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
        # nothing heard within a whole window: the snapshot says so now (unreachable nodes)
        give_up_at = asyncio.get_running_loop().time() + wait_s
        while not heard and asyncio.get_running_loop().time() < give_up_at:
            if await stop.sleep(FIRST_READING_POLL_S):
                return None
        if heard and await stop.sleep(wait_s):
            return None
        return monitor.tick()
    finally:
        await monitor.stop()
