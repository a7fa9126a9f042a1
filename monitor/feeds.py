"""Where a view's snapshots come from: the `SnapshotFeed` protocol and the live feed.

A view (the TUI) is handed a feed and never learns what is behind it: the live
`Monitor` (`MonitorFeed`), a recorded session being replayed, a simulated cluster.
The feed calls `publish(snapshot)` once per frame; `publish` is thread-safe on the
TUI's side, so a feed may call it from its own thread or from the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from infertop.collectors.sources.source import Source
from infertop.layouts.model import Layout
from infertop.monitor.snapshot import Snapshot

if TYPE_CHECKING:
    from infertop.monitor.monitor import Monitor
    from infertop.monitor.record.store import Recorder

Publish = Callable[[Snapshot], None]


@runtime_checkable
class SnapshotFeed(Protocol):
    """A stream of immutable `Snapshot`s for one layout."""

    layout: Layout

    async def start(self, publish: Publish) -> None:
        """Begin publishing. Returns promptly; frames arrive later through `publish`."""

    async def stop(self) -> None:
        """Stop publishing and release what `start` acquired. Safe to call twice."""


@runtime_checkable
class PhaseMarkingFeed(Protocol):
    """A feed whose session phase (build, load, warmup, run, failed, idle) can be marked.

    Optional: a replay cannot change a recorded past, so only live feeds implement it.
    """

    def mark_phase(self, phase: str) -> None: ...


@runtime_checkable
class EndingFeed(Protocol):
    """A feed that can end on its own: a monitor in another process that stopped or died.

    Optional: the viewer leaves when `ended()` returns (why, one line), rather than show
    the last frame as if it were still live.
    """

    async def ended(self) -> str: ...


@runtime_checkable
class InterestFeed(Protocol):
    """A feed told which nodes the viewer shows now: a hint passed down (the viewer reads
    nothing itself), so a source that reads per-GPU detail for only some nodes each tick
    reads those nodes' every tick (collectors/sources/prom_detail.py). Optional."""

    def show_interest(self, nodes: Sequence[str]) -> None: ...


def can_mark_phase(feed: object) -> bool:
    return isinstance(feed, PhaseMarkingFeed)


class MonitorFeed:
    """The live feed: runs a `Monitor` over the layout's sources (or the given ones)."""

    def __init__(
        self,
        layout: Layout,
        sources: Sequence[Source] | None = None,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
    ):
        """`recorder`: the session record, written each tick and closed on `stop`."""
        from infertop.monitor.monitor import (
            Monitor,  # the collectors load with the live feed, not with a viewer
        )

        self.layout = layout
        self.monitor: Monitor = Monitor(layout, sources=sources, clock=clock, recorder=recorder)
        self._publish: Publish | None = None
        self._running = False

    async def start(self, publish: Publish) -> None:
        if self._running:
            return
        self._publish = publish
        self.monitor.listeners.append(publish)
        self._running = True
        await self.monitor.start()

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._publish is not None and self._publish in self.monitor.listeners:
            self.monitor.listeners.remove(self._publish)
        await self.monitor.stop()

    def mark_phase(self, phase: str) -> None:
        """Spend from now on counts to `phase` (split at this instant, recorded or not).
        ValueError for a name that is not a phase."""
        self.monitor.mark_phase(phase)

    def show_interest(self, nodes: Sequence[str]) -> None:
        """The nodes the viewer shows now: their detail is read every tick."""
        self.monitor.set_in_view(nodes)
