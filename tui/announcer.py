"""Announcing verdicts as they start: one announcer, owned by the app and fed every frame
whatever screen is on top, so a verdict that starts while the operator reads a node
screen is told at once, and never twice.

Notifications are few and brief, so that they never cover the node table for long: a
mass event (grouped by the monitor, `evaluation.mass_events`) is one line; everything
that starts within `MIN_GAP_S` of the last toast waits and goes out as one; at most one
toast is on screen, for `TOAST_TIMEOUT_S`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel

from infertop.monitor.evaluation.conditions import SEVERITY_RANK
from infertop.monitor.evaluation.verdicts import hunt_order
from infertop.monitor.format import inert_text
from infertop.monitor.snapshot import NodeView, VerdictGroupView, VerdictView

Key = tuple[str, str]
NOTIFY_SEVERITY: dict[str, SeverityLevel] = {
    "critical": "error", "warning": "warning", "info": "information",
}
# a burst of new verdicts (a switch dies, a whole pool goes idle) is one notification,
# not a wall of toasts: this many are named in it, the rest counted
MAX_NOTIFICATIONS = 3
MIN_GAP_S = 5.0  # at most one toast this often
TOAST_TIMEOUT_S = 4.0  # and each gone this soon


@dataclass(frozen=True)
class News:
    """One thing to tell: a verdict on a node, or a mass event."""

    title: str
    message: str
    severity: str
    count: int  # verdicts it stands for


class VerdictAnnouncer:
    """Notifies when a verdict starts: a (node, kind) that the previous frame did not have.

    The first frame sets the baseline silently: verdicts already standing when the
    operator opens the screen are listed, not announced.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._seen: set[Key] | None = None
        self._groups_told: set[str] = set()
        self._pending: list[News] = []
        self._last_toast_at: float | None = None
        self._clock = clock

    def observe(
        self, app: App[Any], nodes: Sequence[NodeView], groups: Sequence[VerdictGroupView] = ()
    ) -> list[tuple[NodeView, VerdictView]]:
        pairs = hunt_order(nodes)
        seen, self._seen = self._seen, {(n.name, v.kind) for n, v in pairs}
        started = [] if seen is None else [(n, v) for n, v in pairs if (n.name, v.kind) not in seen]
        grouped = {(name, g.kind): g for g in groups for name in g.nodes}
        if seen is None:
            self._groups_told = {g.key for g in groups}
        for node, verdict in started:
            group = grouped.get((node.name, verdict.kind))
            if group is None:
                self._pending.append(News(
                    inert_text(f"{node.name}: {verdict.kind}", 80), inert_text(verdict.detail, 200),
                    verdict.severity, 1,
                ))
            elif group.key not in self._groups_told:
                # told once, with its size as of now; members that join it later are in
                # the hunt list's row, not in new toasts
                self._groups_told.add(group.key)
                self._pending.append(News(
                    inert_text(f"{len(group.nodes)} nodes: {group.kind}", 80),
                    inert_text(group.summary, 200), group.severity, len(group.nodes),
                ))
        self._groups_told &= {g.key for g in groups}
        self._flush(app)
        return started

    def _flush(self, app: App[Any]) -> None:
        if not self._pending:
            return
        now = self._clock()
        if self._last_toast_at is not None and now - self._last_toast_at < MIN_GAP_S:
            return  # told at the next frame past the gap, together with what came since
        news, self._pending = self._pending, []
        worst = min((n.severity for n in news), key=lambda s: SEVERITY_RANK.get(s, len(SEVERITY_RANK)))
        if len(news) == 1:
            title, message = news[0].title, news[0].message
        else:
            total = sum(n.count for n in news)
            # a mass event by its summary ("41 nodes unreachable since …"), a verdict by its title
            named = "; ".join(n.message if n.count > 1 else n.title for n in news[:MAX_NOTIFICATIONS])
            title = "infertop"
            message = f"{total} new verdicts: {named}" + (", …" if len(news) > MAX_NOTIFICATIONS else "")
        # one toast on screen at a time: the newest replaces what is still showing
        app.clear_notifications()
        app.notify(message, title=title, severity=NOTIFY_SEVERITY.get(worst, "warning"),
                   timeout=TOAST_TIMEOUT_S, markup=False)
        self._last_toast_at = now
