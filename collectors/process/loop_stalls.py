"""How long this process's event loop did not run, and timeouts that do not count it.

A starved monitor (CPU-bound parsing on a small machine, a blocked callback, a suspended
process) runs its timers late. A timeout armed with `asyncio.timeout(0.9)` then fires
the moment the loop wakes, before the answer that arrived during the stall has been
read, and a healthy node is reported as "timed out". The monitor's own lateness must
never be blamed on the nodes.

`LoopStallMeter` is a small task that wakes every `period_s` and records each wake that
came later than asked as a stall (wall-clock and loop-clock spans). A loop that is never
blocked for long but never idle either (a monitor parsing pages back to back on a small
machine) stalls every answer just the same: an answer that arrives waits its turn behind
the pages already in. So a period in which the process spent at least `SATURATED_SHARE`
of the wall time on the CPU — or its loop's thread waited that long for one, on a host
whose cores others saturate — counts as a stall as a whole (measured at 256 realistic
nodes on 2 cores: the sampler woke only ~10–20 ms late each time, below `MIN_STALL_S`,
while requests waited ~1 s to be read, and 77 healthy nodes were "no answer within
0.77 s").

`wire_timeout` is `asyncio.timeout` measured on the wire: when its deadline comes, the time the loop was
stalled since it was armed is added back, so it fires only once the request has been
out on the network, with the loop free to read the answer, for the whole timeout. A hard
cap (`max_s`) keeps a truly dead peer from being waited on forever however starved the
loop is.

One meter per event loop (`acquire_meter` / `current_meter`): the monitor starts it, and
the sources look it up; without one, a timeout still excuses its own callback's lateness.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import os
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
PERIOD_S = 0.05  # how often the sampler wakes: fine enough for 0.5 s intervals, ~20 wakes/s
# a wake later than this is a stall: below it is the loop's ordinary jitter (a frame of
# a few ms of work), which no timeout or staleness threshold is sensitive to
MIN_STALL_S = 0.02
WAKE_GRACE_S = 0.05  # a deadline that ran late waits this much more: one turn of the woken loop
KEEP_S = 300.0  # stalls remembered: longer than any node age status judgement looks at
# a sampler period in which the process used this share of a CPU left the loop no time to
# read what arrived (its other threads count too: they hold the interpreter's lock)
SATURATED_SHARE = 0.9


@dataclass(frozen=True)
class Stall:
    """One span in which the loop did not run: loop-clock and wall-clock start and end."""

    loop_start: float
    loop_end: float
    wall_start: float
    wall_end: float

    @property
    def seconds(self) -> float:
        return self.loop_end - self.loop_start


class StallTimeline:
    """The union of stall spans, with running totals: the seconds stalled within any
    [t0, t1] in O(log n). Built once per tick; asked once per node."""

    def __init__(self, spans: Iterable[tuple[float, float]] = ()) -> None:
        merged: list[list[float]] = []
        for start, end in sorted(spans):
            if end <= start:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [m[0] for m in merged]
        self._ends = [m[1] for m in merged]
        self._before = [0.0, *itertools.accumulate(e - s for s, e in merged)]

    def __bool__(self) -> bool:
        return bool(self._starts)

    def _up_to(self, t: float) -> float:
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return 0.0
        return self._before[i] + min(t, self._ends[i]) - self._starts[i]

    def covered_s(self, t0: float, t1: float) -> float:
        return max(self._up_to(t1) - self._up_to(t0), 0.0) if t1 > t0 else 0.0


def covered_s(spans: Iterable[tuple[float, float]], t0: float, t1: float) -> float:
    """Seconds of [t0, t1] covered by the union of `spans` (which may overlap)."""
    return StallTimeline(spans).covered_s(t0, t1)


def runqueue_wait_s() -> float | None:
    """Seconds the calling thread has spent runnable but waiting for a CPU (Linux
    schedstat: on-CPU ns, run-queue wait ns, timeslices); None where the kernel says nothing."""
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:
        fields = os.read(fd, 128).split()
        return int(fields[1]) / 1e9 if len(fields) >= 2 else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


class LoopStallMeter:
    """Records when the running loop stalled. Start it on the loop it measures."""

    def __init__(self, period_s: float = PERIOD_S, min_stall_s: float = MIN_STALL_S, keep_s: float = KEEP_S):
        self.period_s = period_s
        self.min_stall_s = min_stall_s
        self.keep_s = keep_s
        self.stalls: deque[Stall] = deque()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_beat: float | None = None  # loop time of the sampler's latest wake
        self.users = 0  # see acquire_meter

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._last_beat = loop.time()
        self._task = loop.create_task(self._sample(), name="monitor:loop-stalls")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked, cpu_at, waited_at = loop.time(), time.process_time(), runqueue_wait_s()
            await asyncio.sleep(self.period_s)
            woke = loop.time()
            self._last_beat = woke
            # the loop's thread waiting for a CPU (a host whose cores others saturate) wanted
            # to run all the same: that time is as unavailable to it as its own work
            waited = runqueue_wait_s()
            queued = waited - waited_at if waited is not None and waited_at is not None else 0.0
            busy = time.process_time() - cpu_at + queued
            # saturated: the whole period was the loop's own work, not just its lateness
            self.note(asked if busy >= SATURATED_SHARE * (woke - asked) else asked + self.period_s, woke)

    def note(self, due: float, ran: float) -> None:
        """A callback due at loop time `due` ran at `ran`: record the gap as a stall."""
        late = ran - due
        if late < self.min_stall_s:
            return
        wall_now = time.time()
        loop_now = self._loop.time() if self._loop is not None else ran
        offset = wall_now - loop_now  # loop clock → wall clock, now
        stall = Stall(due, ran, due + offset, ran + offset)
        if self.stalls and self.stalls[-1].loop_end > due:
            # an overlapping report (a timeout noting its own lateness): merge, never count twice
            last = self.stalls.pop()
            stall = Stall(
                min(last.loop_start, due), max(last.loop_end, ran),
                min(last.wall_start, stall.wall_start), max(last.wall_end, stall.wall_end),
            )
        self.stalls.append(stall)
        while self.stalls and self.stalls[0].loop_end < ran - self.keep_s:
            self.stalls.popleft()

    def _recent(self, keep: Callable[[Stall], bool], get: Callable[[Stall], T]) -> list[T]:
        """`get` of the newest stalls while `keep` holds, newest first: the ring holds
        minutes of stalls (thousands under starvation) and callers want the last seconds."""
        out: list[T] = []
        for stall in reversed(self.stalls):
            if not keep(stall):
                break
            out.append(get(stall))
        return out

    def ongoing_s(self) -> float:
        """How long the sampler is overdue right now: a stall not yet recorded (the loop
        has just woken and this caller runs before the sampler does)."""
        if self._loop is None or self._last_beat is None or not self.running:
            return 0.0
        overdue = self._loop.time() - (self._last_beat + self.period_s)
        return overdue if overdue >= self.min_stall_s else 0.0

    def stalled_loop_s(self, t0: float, t1: float) -> float:
        """Seconds the loop was stalled between loop times t0 and t1, the ongoing stall included."""
        spans = self._recent(lambda s: s.loop_end > t0, lambda s: (s.loop_start, s.loop_end))
        ongoing = self.ongoing_s()
        if ongoing and self._last_beat is not None:
            start = self._last_beat + self.period_s
            spans.append((start, start + ongoing))
        return covered_s(spans, t0, t1)

    def stalled_wall_s(self, t0: float, t1: float) -> float:
        """Seconds the loop was stalled between wall-clock times t0 and t1 (recorded stalls)."""
        spans = self._recent(lambda s: s.wall_end > t0, lambda s: (s.wall_start, s.wall_end))
        return covered_s(spans, t0, t1)

    def longest_since_wall(self, t0: float) -> float:
        """The longest stall that ended at or after wall time t0 (0 when none)."""
        return max(self._recent(lambda s: s.wall_end >= t0, lambda s: s.seconds), default=0.0)

    def spans_wall(self, since: float) -> list[tuple[float, float]]:
        """Wall-clock spans of the stalls that ended at or after `since`, oldest first,
        the ongoing one included (a tick that runs as the loop wakes, before the sampler)."""
        spans = self._recent(lambda s: s.wall_end >= since, lambda s: (s.wall_start, s.wall_end))
        spans.reverse()
        ongoing = self.ongoing_s()
        if ongoing:
            now = time.time()
            spans.append((now - ongoing, now))
        return spans


_METERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopStallMeter] = weakref.WeakKeyDictionary()


def acquire_meter() -> LoopStallMeter:
    """The running loop's meter, started if none runs; one per loop, shared by whoever
    acquires it. Give it back with `release_meter`: the last user stops it."""
    loop = asyncio.get_running_loop()
    meter = _METERS.get(loop)
    if meter is None or not meter.running:
        meter = LoopStallMeter()
        meter.start()
        _METERS[loop] = meter
    meter.users += 1
    return meter


async def release_meter(meter: LoopStallMeter) -> None:
    meter.users -= 1
    if meter.users <= 0:
        await meter.stop()


def current_meter() -> LoopStallMeter | None:
    """The running loop's meter when one runs (the monitor starts it)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    meter = _METERS.get(loop)
    return meter if meter is not None and meter.running else None


@contextlib.asynccontextmanager
async def wire_timeout(timeout_s: float, max_s: float | None = None) -> AsyncIterator[asyncio.Timeout]:
    """`asyncio.timeout(timeout_s)`, not counting the time the loop was stalled.

    Raises `TimeoutError` like `asyncio.timeout` once `timeout_s` of unstalled time has
    passed, or `max_s` of any time (default: 4 × timeout_s + 10 s). The stall is taken
    from the loop's meter when one runs, and is at least this deadline's own lateness.
    """
    loop = asyncio.get_running_loop()
    meter = current_meter()
    start = loop.time()
    hard = start + (max_s if max_s is not None else 4 * timeout_s + 10.0)
    handle: asyncio.TimerHandle | None = None
    async with asyncio.timeout(None) as cm:

        def check(due: float) -> None:
            nonlocal handle
            now = loop.time()
            late = max(now - due, 0.0)
            stalled = meter.stalled_loop_s(start, now) if meter is not None else 0.0
            if late >= MIN_STALL_S:
                if meter is not None:
                    meter.note(due, now)
                    stalled = meter.stalled_loop_s(start, now)
                stalled = max(stalled, late)
            remaining = timeout_s - (now - start - stalled)
            if late >= MIN_STALL_S:
                # this deadline ran late: the loop just woke, and what arrived meanwhile
                # has not been read yet. One more turn of the loop reads it.
                remaining = max(remaining, WAKE_GRACE_S)
            if remaining <= 0 or now >= hard:
                cm.reschedule(now)  # expire now: asyncio raises TimeoutError in the block
                return
            next_due = min(now + remaining, hard)
            handle = loop.call_at(next_due, again[0], next_due)

        # `check` reschedules itself through `again`, emptied at the end: naming itself, it
        # would be a reference cycle that only the garbage collector frees, holding the
        # Timeout, its task and that task's result (~18 objects a request, ~7k a frame at
        # 128 nodes); so they go as soon as the request is done
        again = [check]
        handle = loop.call_at(start + timeout_s, check, start + timeout_s)
        try:
            yield cm
        finally:
            handle.cancel()
            again.clear()
