"""Where a view's snapshots come from: the `SnapshotFeed` protocol and the live feed.

A view (the TUI) is handed a feed and never learns what is behind it: the live
`Monitor` (`MonitorFeed`), a recorded session being replayed, a simulated cluster.
The feed calls `publish(snapshot)` once per frame; `publish` is thread-safe on the
TUI's side, so a feed may call it from its own thread or from the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from collectors.source import Source
from infertop.runtime import Monitor
from infertop.session import PHASES
from infertop.view import Snapshot
from layouts.model import Layout

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


def can_mark_phase(feed: object) -> bool:
    return isinstance(feed, PhaseMarkingFeed)


class MonitorFeed:
    """The live feed: runs a `Monitor` over the layout's sources (or the given ones)."""

    def __init__(
        self,
        layout: Layout,
        sources: Sequence[Source] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.layout = layout
        self.monitor = Monitor(layout, sources=sources, clock=clock)
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
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
        # spend from the next tick on is attributed to the new phase
        self.monitor.ledger.phase = phase
