"""Replay a session record as a `SnapshotFeed`: the recorded frames at their recorded
pace (or faster), with pause and seek. No Textual here; `tui.replay_app` adds the keys.

A replay cannot mark phases (the past is recorded), so it does not implement
`mark_phase`. Gaps in the recording (a crash, a suspended laptop) are not waited out:
a pause between two frames is capped at `MAX_GAP_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_left
from pathlib import Path

from infertop.monitor.feeds import Publish
from infertop.monitor.record.codec import RecordError
from infertop.monitor.record.recording import Recording

log = logging.getLogger(__name__)
MAX_GAP_S = 2.0


class ReplayFeed:
    """The frames of a recording, published one by one; pausable and seekable."""

    def __init__(self, recording: Recording, speed: float = 1.0):
        if recording.layout is None:
            problem = recording.problems[0] if recording.problems else "no layout"
            raise RecordError(f"{recording.path}: cannot replay ({problem})")
        if not recording.ticks:
            raise RecordError(f"{recording.path}: cannot replay (no readable ticks)")
        self.recording = recording
        self.layout = recording.layout
        self.speed = speed
        self.index = 0  # the next frame to publish
        self.paused = False
        self.finished = False
        self._publish: Publish | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @classmethod
    def open(cls, path: Path, speed: float = 1.0) -> ReplayFeed:
        return cls(Recording.load(path), speed)

    # ------------------------------------------------------------------ position

    @property
    def times(self) -> list[float]:
        return [t.at for t in self.recording.ticks]

    @property
    def position_at(self) -> float:
        """Recorded time of the frame on screen (the last one published)."""
        ticks = self.recording.ticks
        return ticks[max(self.index - 1, 0)].at

    def progress(self) -> float:
        ticks = self.recording.ticks
        span = ticks[-1].at - ticks[0].at
        return 1.0 if span <= 0 else (self.position_at - ticks[0].at) / span

    def status(self) -> str:
        state = "paused" if self.paused else "ended" if self.finished else f"playing ×{self.speed:g}"
        unreadable = len(self.recording.unreadable_snapshots)
        damaged = f", {unreadable} unreadable" if unreadable else ""
        return f"replay {self.index}/{len(self.recording.ticks)}{damaged} ({self.progress():.0%}) {state}"

    def frames_shown(self) -> int:
        """Frames of the recording that can be shown (those not found unreadable so far)."""
        return len(self.recording.ticks) - len(self.recording.unreadable_snapshots)

    # ------------------------------------------------------------------ controls

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self.finished = False
        self._wake.set()

    def toggle_pause(self) -> bool:
        """Pause or resume; returns whether it is now paused."""
        if self.paused:
            self.resume()
        else:
            self.pause()
        return self.paused

    def seek_to(self, at: float) -> None:
        """Show the frame recorded at or just after `at` (clamped to the recording)."""
        times = self.times
        i = min(bisect_left(times, at), len(times) - 1)
        self._show(i)

    def seek(self, delta_s: float) -> None:
        """Move by `delta_s` seconds of recorded time (negative: back)."""
        self.seek_to(self.position_at + delta_s)

    def seek_index(self, index: int) -> None:
        self._show(max(0, min(index, len(self.recording.ticks) - 1)))

    def _show(self, i: int) -> None:
        self.index = i
        self.finished = False
        self._publish_next()  # the frame shows at once, paused or not
        self._wake.set()

    def _publish_next(self) -> bool:
        ticks = self.recording.ticks
        if self.index >= len(ticks):
            return False
        snapshot = self.recording.snapshot(ticks[self.index].id)
        self.index += 1
        if snapshot is not None and self._publish is not None:
            self._publish(snapshot)
        return True

    # ------------------------------------------------------------------ the feed

    async def start(self, publish: Publish) -> None:
        if self._task is not None:
            return
        self._publish = publish
        self._publish_next()
        self._task = asyncio.create_task(self._run(), name="replay")

    async def _run(self) -> None:
        ticks = self.recording.ticks
        while True:
            if self.paused or self.index >= len(ticks):
                self.finished = self.index >= len(ticks)
                self._wake.clear()
                await self._wake.wait()
                continue
            gap = ticks[self.index].at - ticks[self.index - 1].at if self.index > 0 else 0.0
            delay = min(max(gap, 0.0) / self.speed, MAX_GAP_S)
            self._wake.clear()
            # a seek or a pause during the wait restarts the step from the new position
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
                continue
            if not self.paused:
                self._publish_next()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.recording.close()
