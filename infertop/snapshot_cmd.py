"""`infertop snapshot`: collect for one window, evaluate once, return the Snapshot."""

from __future__ import annotations

import asyncio

from collectors.source import Source
from infertop.runtime import Monitor
from infertop.view import Snapshot
from layouts.model import Layout


async def take_snapshot(
    layout: Layout, window_s: float | None = None, sources: list[Source] | None = None
) -> Snapshot:
    window = window_s if window_s is not None else layout.cluster.window_s
    if window_s is not None:
        layout = layout.model_copy(
            update={"cluster": layout.cluster.model_copy(update={"window_s": window})}
        )
    monitor = Monitor(layout, sources=sources)
    # tick through the window, not just at its end: a verdict shows only once its
    # condition has been seen to hold for the hold time (the tracker needs the ticks)
    await monitor.start(tick=True)
    try:
        # rates need two readings: wait at least two intervals even for a tiny window
        await asyncio.sleep(max(window, 2 * layout.cluster.interval_s) + 0.2)
        return monitor.tick()
    finally:
        await monitor.stop()
