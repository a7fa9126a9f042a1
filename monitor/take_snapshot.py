"""`infertop snapshot`: collect for one window, evaluate once, return the Snapshot."""

from __future__ import annotations

import asyncio

from infertop.collectors.source import Source
from infertop.layouts.model import Layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from infertop.monitor.stopping import Stop


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
    # a window shorter than a hold time would hide every condition: report those seen
    # but not yet held, marked pending with the time held
    monitor.verdicts.report_pending = True
    # tick through the window, not just at its end: a verdict shows only once its
    # condition has been seen to hold for the hold time (the tracker needs the ticks)
    await monitor.start(tick=True)
    try:
        # rates need two readings: wait at least two intervals even for a tiny window
        wait_s = max(window, 2 * layout.cluster.interval_s) + 0.2
        if stop is None:
            await asyncio.sleep(wait_s)
        elif await stop.sleep(wait_s):
            return None
        return monitor.tick()
    finally:
        await monitor.stop()
