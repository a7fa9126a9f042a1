"""Garbage collection at a quiet moment of each frame, not in the middle of the work.

Both processes of a session allocate in bursts once a second: the monitor reads 3 × N
pages and builds a snapshot, a viewer reads that snapshot (128 nodes: ~20k tracked
objects living until the next frame) and draws it. Left to the thresholds, the
collector ran in the middle of those bursts. Measured at 128 realistic nodes
(benchmarks/bench_tui attached run, benchmarks/monitor_child): the viewer made 53
young, 5 middle and 1 full collection in 28 frames, 450 ms in all and up to 84 ms at
once, so one frame in three took over 50 ms to draw; the monitor stood still up to
186-364 ms in a full collection, across the reads of a round.

Paced: the automatic thresholds are raised so they do not fire within a frame's burst
(they stay as a safety net), the young generations are collected once a frame after
its work (a viewer: once the frame is on screen; the monitor: after its tick), and a
full collection runs every FULL_COLLECTION_EVERY_FRAMES frames. What a process holds
for good once started (modules, classes, its layout) is frozen out of full collections
(`gc.freeze`), so those scan what changes, not the whole interpreter.
"""

from __future__ import annotations

import gc

PACED_GEN0_THRESHOLD = 400_000
FULL_COLLECTION_EVERY_FRAMES = 60


class PacedCollector:
    """Collects between frames. `install` once the process is set up, `after_frame`
    after each frame's work, `uninstall` to go back (a test process goes on)."""

    def __init__(self, freeze: bool = False) -> None:
        self.freeze = freeze
        self.frames = 0
        self._saved: tuple[int, int, int] | None = None

    @property
    def installed(self) -> bool:
        return self._saved is not None

    def install(self) -> None:
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        if self.freeze:
            gc.collect()
            gc.freeze()
        gc.set_threshold(PACED_GEN0_THRESHOLD, self._saved[1], self._saved[2])

    def uninstall(self) -> None:
        if self._saved is None:
            return
        gc.set_threshold(*self._saved)
        self._saved = None
        if self.freeze:
            gc.unfreeze()

    def after_frame(self, *_: object) -> None:
        """Collect the young generations; every so many frames, everything."""
        if self._saved is None:
            return
        self.frames += 1
        gc.collect(2 if self.frames % FULL_COLLECTION_EVERY_FRAMES == 0 else 1)
