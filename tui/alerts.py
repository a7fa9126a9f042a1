"""Opt-in alerts (`[alerts]` in the layout): the terminal bell when a verdict starts or
the budget passes a threshold.

The viewer decides only whether to ring. What is new comes from the snapshots: a verdict
is new when a (node, kind, since) appears that the previous frame did not have (`since`
is when the monitor says it started; pending conditions never ring), and a budget
threshold is the snapshot's `budget_alert` ("80%", "100%") rising. The first frame sets
the baseline silently: what already stood when the screen opened is listed, not rung.
A muted alerter keeps its baseline up to date, so unmuting does not ring for the past.

Bell only: Textual offers `App.bell()` publicly and no desktop notification API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from textual.app import App

from infertop.monitor.snapshot import Snapshot

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
BUDGET_RANK = {"80%": 1, "100%": 2}

VerdictKey = tuple[str, str, float | None]


class AlertSettings(Protocol):
    """What the alerter reads: the layout's `[alerts]` (`layouts.model.AlertsConfig`,
    reached through the feed: viewers do not import the layout room)."""

    @property
    def bell(self) -> bool: ...
    @property
    def on(self) -> str: ...
    @property
    def budget(self) -> bool: ...
    @property
    def min_interval_s(self) -> float: ...


@dataclass(frozen=True)
class AlertsOff:
    """No bell (a replay: the past does not ring)."""

    bell: bool = False
    on: str = "critical"
    budget: bool = False
    min_interval_s: float = 5.0


class Alerter:
    def __init__(self, config: AlertSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.muted = False
        self.rung = 0  # bells rung
        self.held_back = 0  # alerts that came within min_interval_s of a bell: not rung
        self._verdicts: set[VerdictKey] | None = None  # None until the first frame
        self._budget_rank = 0
        self._last_bell: float | None = None

    @property
    def active(self) -> bool:
        """The layout asked for alerts: the mute key is offered."""
        return self.config.bell

    def state(self) -> str | None:
        """For the header: None (alerts off), "on" or "muted"."""
        if not self.active:
            return None
        return "muted" if self.muted else "on"

    def toggle_mute(self) -> bool:
        self.muted = not self.muted
        return self.muted

    def reasons(self, snapshot: Snapshot) -> list[str]:
        """What in this frame is new and worth a bell (the baseline moves on either way)."""
        floor = SEVERITY_RANK.get(self.config.on, SEVERITY_RANK["critical"])
        current: set[VerdictKey] = set()
        started: list[str] = []
        for node in snapshot.nodes:
            for v in node.verdicts:
                if v.pending or SEVERITY_RANK.get(v.severity, 0) < floor:
                    continue
                key = (node.name, v.kind, v.since)
                current.add(key)
                if self._verdicts is not None and key not in self._verdicts:
                    started.append(f"{v.severity} {node.name} {v.kind}")
        first = self._verdicts is None
        self._verdicts = current
        rank = BUDGET_RANK.get(snapshot.session.budget_alert or "", 0)
        if self.config.budget and rank > self._budget_rank and not first:
            started.append(f"budget {snapshot.session.budget_alert}")
        self._budget_rank = rank  # a new budget (or a replay sought back) lowers it
        return started

    def observe(self, app: App[Any], snapshot: Snapshot) -> list[str]:
        """Ring `app.bell()` for what is new in `snapshot`, unless off, muted or within
        `min_interval_s` of the last bell. Returns what was new (rung or not)."""
        new = self.reasons(snapshot)
        if not new or not self.config.bell or self.muted:
            return new
        now = self.clock()
        if self._last_bell is not None and now - self._last_bell < self.config.min_interval_s:
            self.held_back += 1
            return new
        self._last_bell = now
        self.rung += 1
        app.bell()
        return new
