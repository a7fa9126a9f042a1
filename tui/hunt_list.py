"""The hunt list: every active verdict across the cluster, worst first.

Sorted by severity, then by dollars per hour at stake (`evaluation.verdicts.hunt_order`),
so the node burning the most money for the worst reason is on top. Enter posts
`OpenNode` for the selected row's node; the app opens the node screen. Announcing verdicts
that start is the app's (tui/announcer.py), whatever screen is on top.

Rows are keyed by (node, kind) and updated in place (a `RowTable`): the cursor stays on
its verdict while others come and go. A mass event (many nodes entering one verdict
together, grouped by the monitor: `evaluation.mass_events`) is one row, "41 nodes", its
members named in the evidence column; Enter on it opens its first node.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rich.text import Text
from textual.binding import Binding

from monitor.evaluation.mass_events import hunt_entries
from monitor.format import fmt_age, fmt_usd
from monitor.snapshot import NodeView, Snapshot, VerdictGroupView, VerdictView
from tui.messages import OpenNode
from tui.row_table import RowTable
from tui.text import inert

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
COLUMNS = (("severity", "SEV"), ("node", "NODE"), ("kind", "VERDICT"), ("since", "FOR"),
           ("stake", "$/H AT STAKE"), ("detail", "EVIDENCE"))

Key = tuple[str, str]


def _row_key(key: Key) -> str:
    return f"{key[0]}\x1f{key[1]}"  # a separator no node name or verdict kind can hold


def group_label(group: VerdictGroupView) -> str:
    return f"{len(group.nodes)} nodes"


def _group_row_key(group: VerdictGroupView) -> str:
    # the label where a node name goes: "41 nodes" (no node is named with a separator),
    # and the group's own key so that a new event of the same kind is a new row
    return _row_key((f"{group_label(group)}\x1e{group.key}", group.kind))


def _key_of(row: str) -> Key:
    node, _, kind = row.partition("\x1f")
    return (node.partition("\x1e")[0], kind)


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


def group_cells(group: VerdictGroupView, now: float) -> tuple[Text, ...]:
    style = SEVERITY_STYLE.get(group.severity, "")
    age = None if group.since is None else max(now - group.since, 0.0)
    return (
        inert(group.severity, style),
        inert(group_label(group), "bold"),
        inert(group.kind, style, max_len=24),
        Text(fmt_age(age), justify="right"),
        Text(fmt_usd(group.usd_per_hour_at_stake), justify="right"),
        inert(group.summary, max_len=300),
    )


class HuntList(RowTable):
    """An alerts panel: (node, verdict) rows in hunt order. Feed it with `show(snapshot)`."""

    BINDINGS = [Binding("enter", "select_cursor", "Open node", show=True)]

    def __init__(self, **kwargs: object) -> None:
        super().__init__([(key, label, None) for key, label in COLUMNS], **kwargs)
        self._opens: dict[str, str] = {}  # row key → the node Enter opens

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.show(snapshot)

    @property
    def entries(self) -> list[Key]:
        """(node, kind) pairs as displayed, top to bottom."""
        return [_key_of(row) for row in self.displayed_order()]

    def current(self) -> Key | None:
        row = self.current_key()
        return None if row is None else _key_of(row)

    def show(self, snapshot: Snapshot) -> None:
        now = dt.datetime.fromisoformat(snapshot.taken_at).timestamp()
        self.show_nodes(snapshot.nodes, now, snapshot.verdict_groups)

    def show_nodes(
        self, nodes: Sequence[NodeView], now: float, groups: Sequence[VerdictGroupView] = ()
    ) -> None:
        rows: list[tuple[str, tuple[Text, ...]]] = []
        opens: dict[str, str] = {}
        for entry in hunt_entries(nodes, groups):
            if isinstance(entry, VerdictGroupView):
                key = _group_row_key(entry)
                rows.append((key, group_cells(entry, now)))
                opens[key] = entry.nodes[0]
            else:
                node, verdict = entry
                key = _row_key((node.name, verdict.kind))
                rows.append((key, row_cells(node, verdict, now)))
                opens[key] = node.name
        self._opens = opens
        self.sync(rows)
        self.set_order([key for key, _ in rows])

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table is self:
            event.stop()
            self.post_message(OpenNode(self._opens.get(event.key, _key_of(event.key)[0])))
