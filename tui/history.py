"""The app's own bounded history of figures, for sparklines.

Built from the snapshots the app receives (not from fleet state, which the UI never
touches). Bounded twice: `length` points per series, and series of nodes or GPUs that
left the snapshot are dropped.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import TypeVar

from monitor.snapshot import Snapshot

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
