"""The hunt list: every active verdict across the cluster, worst first.

Sorted by severity, then by dollars per hour at stake (`evaluation.verdicts.hunt_order`),
so the node burning the most money for the worst reason is on top. Enter posts
`OpenNode` for the selected row's node; the app opens the node screen. A verdict that was
not in the previous frame raises a notification (`VerdictAnnouncer`); an app that keeps
its own announcer as `verdict_announcer` and feeds it every frame tells of verdicts that
start while another screen is on top, and the list then leaves announcing to it.

Rows are keyed by (node, kind) and updated in place: the cursor stays on its verdict while
others come and go.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from collectors.safe_text import inert_text
from infertop.evaluation.verdicts import hunt_order
from infertop.format import fmt_age, fmt_usd
from infertop.view import NodeView, Snapshot, VerdictView
from tui.messages import OpenNode
from tui.text import inert

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
NOTIFY_SEVERITY: dict[str, SeverityLevel] = {
    "critical": "error", "warning": "warning", "info": "information",
}
# a burst of new verdicts (a switch dies, a whole pool goes idle) is one notification,
# not a wall of toasts
MAX_NOTIFICATIONS = 3
COLUMNS = (("severity", "SEV"), ("node", "NODE"), ("kind", "VERDICT"), ("since", "FOR"),
           ("stake", "$/H AT STAKE"), ("detail", "EVIDENCE"))

Key = tuple[str, str]


def _row_key(key: Key) -> str:
    return f"{key[0]}\x1f{key[1]}"  # a separator no node name or verdict kind can hold


def _signature(cells: Sequence[Text]) -> tuple[str, ...]:
    return tuple(f"{c.plain}\x1f{c.style}" for c in cells)


def row_cells(node: NodeView, verdict: VerdictView, now: float) -> tuple[Text, ...]:
    style = SEVERITY_STYLE.get(verdict.severity, "")
    age = None if verdict.since is None else max(now - verdict.since, 0.0)
    return (
        inert(verdict.severity, style),
        inert(node.name, max_len=64),
        inert(verdict.kind, style, max_len=24),
        Text(fmt_age(age), justify="right"),
        Text(fmt_usd(verdict.usd_per_hour_at_stake), justify="right"),
        inert(verdict.detail, max_len=300),
    )


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


class HuntList(DataTable[Text]):
    """An alerts panel: (node, verdict) rows in hunt order. Feed it with `show(snapshot)`."""

    BINDINGS = [Binding("enter", "select_cursor", "Open node", show=True)]

    def __init__(self, *, notify: bool = True, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.notify_new = notify
        self._shown: dict[Key, tuple[str, ...]] = {}
        self._order: list[Key] = []
        self._announcer = VerdictAnnouncer()
        self._pending: tuple[Sequence[NodeView], float] | None = None

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key, width=None)
        if self._pending is not None:  # a frame that came before the columns existed
            self.show_nodes(*self._pending)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.show(snapshot)

    @property
    def entries(self) -> list[Key]:
        """(node, kind) pairs as displayed, top to bottom."""
        return list(self._order)

    def current(self) -> Key | None:
        if not self.row_count:
            return None
        row = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return self._key_of(row)

    def _key_of(self, row: RowKey) -> Key | None:
        node, _, kind = str(row.value).partition("\x1f")
        return (node, kind) if kind else None

    def show(self, snapshot: Snapshot) -> None:
        now = dt.datetime.fromisoformat(snapshot.taken_at).timestamp()
        self.show_nodes(snapshot.nodes, now)

    def show_nodes(self, nodes: Sequence[NodeView], now: float) -> None:
        if not self.columns:
            self._pending = (nodes, now)
            return
        self._pending = None
        pairs = hunt_order(nodes)
        keep = self.current()
        wanted = {(n.name, v.kind): (n, v) for n, v in pairs}
        order = [(n.name, v.kind) for n, v in pairs]
        if order != self._order:
            # verdicts came, went or changed rank: rare, and the list is short, so the
            # rows are laid out afresh rather than shuffled one by one
            self.clear()
            self._shown.clear()
            for key in order:
                cells = row_cells(*wanted[key], now)
                self.add_row(*cells, key=_row_key(key))
                self._shown[key] = _signature(cells)
        else:
            for key in order:
                cells = row_cells(*wanted[key], now)
                signature = _signature(cells)
                old = self._shown[key]
                for (col, _), cell, a, b in zip(COLUMNS, cells, old, signature, strict=True):
                    if a != b:
                        self.update_cell(_row_key(key), col, cell, update_width=True)
                self._shown[key] = signature
        self._order = order
        if keep is not None and keep in self._shown:
            row = self.get_row_index(RowKey(_row_key(keep)))
            if row != self.cursor_row:
                self.move_cursor(row=row, animate=False)
        # the app may announce every frame itself (so verdicts that start while another
        # screen is on top are told at once); otherwise this list does, for what it shows
        if self.notify_new and getattr(self.app, "verdict_announcer", None) is None:
            self._announcer.observe(self.app, nodes)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = self._key_of(event.row_key)
        if key is not None:
            event.stop()
            self.post_message(OpenNode(key[0]))
