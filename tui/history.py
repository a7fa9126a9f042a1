"""The app's own bounded history of figures, for sparklines.

Built from the snapshots the app receives (not from fleet state, which the UI never
touches). Bounded twice: `length` points per series, and series of nodes or GPUs that
left the snapshot are dropped.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from infertop.monitor.snapshot import Snapshot

Series = deque[float | None]
K = TypeVar("K")


class History:
    def __init__(self, length: int = 60):
        self.length = length
        self.node_util: dict[str, Series] = {}
        self.node_steps: dict[str, Series] = {}
        self.gpu_util: dict[tuple[str, int], Series] = {}
        self.gpu_power: dict[tuple[str, int], Series] = {}
        # the scoreboard's live point (tokens/s per user, per GPU), for its trail
        self.live_point: deque[tuple[float, float] | None] = deque(maxlen=length)
        self._last_taken_at: str | None = None

    def _push(self, table: dict[K, Series], key: K, value: float | None) -> None:
        series = table.get(key)
        if series is None:
            series = table[key] = deque(maxlen=self.length)
        series.append(value)

    def clear(self) -> None:
        for table in (self.node_util, self.node_steps, self.gpu_util, self.gpu_power):
            table.clear()
        self.live_point.clear()
        self._last_taken_at = None

    def record(self, snapshot: Snapshot) -> None:
        if snapshot.taken_at == self._last_taken_at:
            return  # the same frame twice (a re-render) is not a new point
        self._last_taken_at = snapshot.taken_at
        s = snapshot.session
        per_user, per_gpu = s.output_tokens_per_s_per_user, s.output_tokens_per_s_per_gpu
        self.live_point.append(None if per_user is None or per_gpu is None else (per_user, per_gpu))
        nodes: set[str] = set()
        gpus: set[tuple[str, int]] = set()
        for node in snapshot.nodes:
            nodes.add(node.name)
            # a stale node's values are old: a gap, not a repeated point
            fresh = node.status == "ok"
            self._push(self.node_util, node.name, node.gpu_util_pct if fresh else None)
            steps = node.engine.decode_steps_per_s if node.engine is not None and fresh else None
            self._push(self.node_steps, node.name, steps)
            for gpu in node.gpus:
                key = (node.name, gpu.index)
                gpus.add(key)
                self._push(self.gpu_util, key, gpu.util_pct if fresh else None)
                self._push(self.gpu_power, key, gpu.power_w if fresh else None)
        for table in (self.node_util, self.node_steps):
            for name in [k for k in table if k not in nodes]:
                del table[name]
        for gtable in (self.gpu_util, self.gpu_power):
            for key in [k for k in gtable if k not in gpus]:
                del gtable[key]

    @staticmethod
    def peak(table: dict[K, Series], keys: Iterable[K], last: int) -> float | None:
        """The largest finite value among the last `last` points (what a sparkline of
        that width draws) of the series `keys`: a scale shared by those lines, so one
        lower than its peers looks lower. None when none is known."""
        known = [
            v for key in keys for v in list(table.get(key, ()))[-last:]
            if v is not None and math.isfinite(v)
        ]
        return max(known) if known else None

    @staticmethod
    def values(table: dict[K, Series], key: K) -> list[float | None]:
        series = table.get(key)
        return list(series) if series is not None else []


@dataclass(frozen=True)
class Mark:
    """Something that happened at `at` (unix s), drawn on a chart's time axis."""

    at: float
    glyph: str  # one cell: a phase's initial, or ! for a verdict start
    style: str
    label: str


def epoch_of(iso: str | None) -> float | None:
    """An ISO 8601 time from a snapshot as unix seconds; None when absent or unreadable."""
    if not iso:
        return None
    try:
        moment = dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


class SpendHistory:
    """The session's spend over the frames the panel saw: spend, the $/h between
    successive frames, accepted tokens/s, and marks for phase changes and verdict starts.

    The rate is Δspend ÷ Δt of two frames (what the chart draws), so a cumulative figure
    never shows as a solid bar. A frame older than the last one (a replay sought back)
    starts the history again: the two stretches do not join.
    """

    def __init__(self, length: int = 240, marks: int = 64):
        self.times: deque[float] = deque(maxlen=length)
        self.spend: Series = deque(maxlen=length)
        self.rate_usd_per_h: Series = deque(maxlen=length)
        self.tokens_per_s: Series = deque(maxlen=length)
        self.marks: deque[Mark] = deque(maxlen=marks)
        self._phase: str | None = None
        self._verdicts: set[tuple[str, str, float | None]] = set()

    def clear(self) -> None:
        for series in (self.times, self.spend, self.rate_usd_per_h, self.tokens_per_s, self.marks):
            series.clear()
        self._phase = None
        self._verdicts = set()

    def record(self, snapshot: Snapshot) -> bool:
        """Add a frame; False when it is not a new point (a re-render, a bad time)."""
        at = epoch_of(snapshot.taken_at)
        if at is None:
            return False
        if self.times and at <= self.times[-1]:
            if at == self.times[-1]:
                return False
            self.clear()
        s = snapshot.session
        rate = None
        if self.times and self.spend[-1] is not None and s.spend_usd is not None:
            rate = (s.spend_usd - self.spend[-1]) / (at - self.times[-1]) * 3600.0
        self.times.append(at)
        self.spend.append(s.spend_usd)
        self.rate_usd_per_h.append(rate)
        self.tokens_per_s.append(s.accepted_tokens_per_s)
        if self._phase is not None and s.phase != self._phase:
            self.marks.append(Mark(at, (s.phase[:1] or "?"), "bold cyan", f"phase {s.phase}"))
        self._phase = s.phase
        # a verdict start is a (node, kind, since) the previous frame did not have; its
        # mark sits at `since`, when the monitor says it started
        verdicts = set()
        for node in snapshot.nodes:
            for v in node.verdicts:
                if v.pending or v.severity not in ("critical", "warning"):
                    continue
                key = (node.name, v.kind, v.since)
                verdicts.add(key)
                if key not in self._verdicts and v.since is not None:
                    style = "bold red" if v.severity == "critical" else "bold yellow"
                    self.marks.append(Mark(v.since, "!", style, f"{node.name} {v.kind}"))
        self._verdicts = verdicts
        return True
