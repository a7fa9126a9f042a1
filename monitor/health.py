"""The monitor measuring itself: how late its ticks run, how long its loop stands still,
how much CPU it takes, and what to change when it cannot keep up.

A monitor starved of CPU (128 nodes on 2 cores), or one whose loop a callback blocked,
reads every node late. Those are the monitor's limits, not the cluster's faults: the
node judgement excuses them (monitor.evaluation.figures.node_status) and the header says
"monitor lagging: 1.4 s behind, CPU 100 % — try interval_s = 2 or the prom source".
The text is composed here; viewers draw it as it is.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from infertop.collectors.process.loop_stalls import LoopStallMeter
from infertop.monitor.snapshot import MonitorHealthView

RECENT_S = 10.0  # what "lately" means: the warning stays this long after the last lateness
CPU_SPAN_S = 3.0  # CPU share over about this much time (a few ticks)
LATE_SHARE = 0.25  # a tick later than this share of the interval is lagging
STALL_SHARE = 0.5  # a loop stall longer than this share of the interval is lagging
MIN_LATE_S = 0.1  # … and never for less than this (a frame drawn in the same process)
# frames drawn without their whole round, lately, that make the monitor say it lags: one
# is a hiccup (one slow page on a busy machine), not a monitor that cannot keep up
MIN_ROUNDS_LATE = 2
# intervals a lagging monitor may suggest (the next one at least twice the current)
NICE_INTERVALS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0)
PROM_SUGGESTED_FROM_NODES = 32  # past this many directly read nodes, Prometheus aggregates


def suggested_interval_s(interval_s: float) -> float:
    return next((n for n in NICE_INTERVALS_S if n >= 2 * interval_s), 2 * interval_s)


def suggestion(interval_s: float, direct_nodes: int, has_prometheus: bool) -> str:
    """What to change so that the monitor keeps up: a longer interval, the prom source."""
    longer = f"try interval_s = {suggested_interval_s(interval_s):g}"
    if direct_nodes >= PROM_SUGGESTED_FROM_NODES and not has_prometheus:
        return f"{longer} or the prom source"
    return longer


def health_view(
    interval_s: float,
    lag_s: float | None,
    stall_max_s: float | None,
    stalled_fraction: float | None,
    cpu_pct: float | None,
    nodes_excused: int,
    advice: str,
    rounds_late: int = 0,
) -> MonitorHealthView:
    """Judge the measurements: lagging, and why in one line. Pure. `rounds_late`: frames
    lately that were drawn without all of their reading instant's round (the readings
    took longer than the frame may wait: the monitor could not read N nodes in time)."""
    late_at = max(LATE_SHARE * interval_s, MIN_LATE_S)
    stall_at = max(STALL_SHARE * interval_s, MIN_LATE_S)
    late = lag_s is not None and lag_s > late_at
    stalled = stall_max_s is not None and stall_max_s > stall_at
    lagging = late or stalled or nodes_excused > 0 or rounds_late >= MIN_ROUNDS_LATE
    reason = None
    if lagging:
        parts = [f"{lag_s or 0.0:.1f} s behind"]
        if rounds_late >= MIN_ROUNDS_LATE:
            parts.append(f"readings not in time for {rounds_late} frames")  # never 1: MIN_ROUNDS_LATE
        if stalled and stall_max_s is not None and stall_max_s > (lag_s or 0.0):
            parts.append(f"loop blocked or saturated {stall_max_s:.1f} s")
        if cpu_pct is not None:
            parts.append(f"CPU {cpu_pct:.0f} %")
        if nodes_excused:
            parts.append(f"{nodes_excused} node{'s' if nodes_excused != 1 else ''} read late, not blamed")
        reason = ", ".join(parts)
    return MonitorHealthView(
        lag_s=lag_s,
        loop_stall_max_s=stall_max_s,
        loop_stalled_fraction=stalled_fraction,
        cpu_pct=cpu_pct,
        lagging=lagging,
        reason=reason,
        suggestion=advice if lagging else None,
        nodes_excused=nodes_excused,
        rounds_late=rounds_late,
    )


class MonitorHealth:
    """Keeps the recent measurements of one monitor; `view` turns them into the snapshot's."""

    def __init__(self, interval_s: float, wall: Callable[[], float] = time.time,
                 cpu: Callable[[], float] = time.process_time) -> None:
        self.interval_s = interval_s
        self._wall = wall
        self._cpu = cpu
        self.recent_s = max(RECENT_S, 5 * interval_s)
        self._late: deque[tuple[float, float]] = deque()  # (wall time the tick ran, seconds late)
        self._missed: deque[float] = deque()  # wall times of ticks drawn without their round
        self._cpu_marks: deque[tuple[float, float]] = deque()  # (wall, process CPU seconds)

    def tick_ran(self, slot: float, ran: float, round_missed: bool = False) -> None:
        """A tick meant for wall time `slot` ran at `ran`; `round_missed`: without all of
        the readings it waited for (they were not in by the latest it may wait)."""
        self._late.append((ran, max(ran - slot, 0.0)))
        if round_missed:
            self._missed.append(ran)

    def _forget(self, now: float) -> None:
        while self._late and self._late[0][0] < now - self.recent_s:
            self._late.popleft()
        while self._missed and self._missed[0] < now - self.recent_s:
            self._missed.popleft()
        while len(self._cpu_marks) > 2 and self._cpu_marks[1][0] <= now - CPU_SPAN_S:
            self._cpu_marks.popleft()

    def cpu_pct(self) -> float | None:
        """Process CPU time over wall time since about CPU_SPAN_S ago, % of one core."""
        now = self._wall()
        self._cpu_marks.append((now, self._cpu()))
        self._forget(now)
        (w0, c0), (w1, c1) = self._cpu_marks[0], self._cpu_marks[-1]
        if w1 - w0 <= 0.05:
            return None
        return max(c1 - c0, 0.0) / (w1 - w0) * 100.0

    def view(self, meter: LoopStallMeter | None, nodes_excused: int, advice: str) -> MonitorHealthView:
        now = self._wall()
        cpu = self.cpu_pct()
        self._forget(now)
        lag = max((late for _, late in self._late), default=None)
        stall_max = stalled = None
        if meter is not None:
            stall_max = max(meter.longest_since_wall(now - self.recent_s), meter.ongoing_s())
            stalled = meter.stalled_wall_s(now - self.recent_s, now) / self.recent_s
        return health_view(self.interval_s, lag, stall_max, stalled, cpu, nodes_excused, advice,
                           rounds_late=len(self._missed))
