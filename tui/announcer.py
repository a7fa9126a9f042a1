"""Announcing verdicts as they start: one announcer, owned by the app and fed every frame
whatever screen is on top, so a verdict that starts while the operator reads a node
screen is told at once, and never twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel

from monitor.evaluation.verdicts import hunt_order
from monitor.format import inert_text
from monitor.snapshot import NodeView, VerdictView

Key = tuple[str, str]
NOTIFY_SEVERITY: dict[str, SeverityLevel] = {
    "critical": "error", "warning": "warning", "info": "information",
}
# a burst of new verdicts (a switch dies, a whole pool goes idle) is one notification,
# not a wall of toasts
MAX_NOTIFICATIONS = 3


class VerdictAnnouncer:
    """Notifies when a verdict starts: a (node, kind) that the previous frame did not have.

    The first frame sets the baseline silently: verdicts already standing when the
    operator opens the screen are listed, not announced.
    """

    def __init__(self) -> None:
        self._seen: set[Key] | None = None

    def observe(self, app: App[Any], nodes: Sequence[NodeView]) -> list[tuple[NodeView, VerdictView]]:
        pairs = hunt_order(nodes)
        seen, self._seen = self._seen, {(n.name, v.kind) for n, v in pairs}
        started = [] if seen is None else [(n, v) for n, v in pairs if (n.name, v.kind) not in seen]
        if len(started) > MAX_NOTIFICATIONS:
            worst = started[0][1].severity
            names = ", ".join(inert_text(f"{n.name} {v.kind}", 60) for n, v in started[:MAX_NOTIFICATIONS])
            app.notify(
                f"{len(started)} new verdicts: {names}, …",
                title="infertop", severity=NOTIFY_SEVERITY.get(worst, "warning"), markup=False,
            )
            return started
        for node, verdict in started:
            app.notify(
                inert_text(verdict.detail, 200),
                title=inert_text(f"{node.name}: {verdict.kind}", 80),
                severity=NOTIFY_SEVERITY.get(verdict.severity, "warning"),
                markup=False,
            )
        return started
