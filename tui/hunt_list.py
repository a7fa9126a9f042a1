"""The hunt list: every active verdict across the cluster, worst first.

Sorted by severity, then by dollars per hour at stake (`evaluation.verdicts.hunt_order`),
so the node burning the most money for the worst reason is on top. Enter posts
`OpenNode` for the selected row's node; the app opens the node screen. Announcing verdicts
that start is the app's (tui/announcer.py), whatever screen is on top.

Rows are keyed by (node, kind) and updated in place (a `RowTable`): the cursor stays on
its verdict while others come and go.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rich.text import Text
from textual.binding import Binding

from monitor.evaluation.verdicts import hunt_order
from monitor.format import fmt_age, fmt_usd
from monitor.snapshot import NodeView, Snapshot, VerdictView
from tui.messages import OpenNode
from tui.row_table import RowTable
from tui.text import inert

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
COLUMNS = (("severity", "SEV"), ("node", "NODE"), ("kind", "VERDICT"), ("since", "FOR"),
           ("stake", "$/H AT STAKE"), ("detail", "EVIDENCE"))

Key = tuple[str, str]


def _row_key(key: Key) -> str:
    return f"{key[0]}\x1f{key[1]}"  # a separator no node name or verdict kind can hold


def _key_of(row: str) -> Key:
    node, _, kind = row.partition("\x1f")
    return (node, kind)


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


def fmt_since(since: float | None, now: float) -> str:
    """When a verdict started, as a clock time in UTC (with the date when not today),
    and how long ago: "06:41:12 UTC (3m ago)"."""
    if since is None:
        return "unknown"
    at = dt.datetime.fromtimestamp(since, dt.UTC)
    today = dt.datetime.fromtimestamp(now, dt.UTC).date()
    clock = at.strftime("%H:%M:%S UTC") if at.date() == today else at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{clock} ({fmt_age(max(now - since, 0.0))} ago)"


def detail_text(node: NodeView, verdict: VerdictView, now: float) -> Text:
    """The selected verdict in full, for the line under the list: what, where, since
    when, the money at stake, and the whole evidence (it wraps; the table cuts it)."""
    style = SEVERITY_STYLE.get(verdict.severity, "")
    out = Text()
    out.append(inert(verdict.kind, style, max_len=24))
    out.append(" on ")
    out.append(inert(node.name, "bold", max_len=64))
    out.append(f" · {verdict.severity} · since {fmt_since(verdict.since, now)}", "grey70")
    if verdict.usd_per_hour_at_stake is not None:
        out.append(f" · {fmt_usd(verdict.usd_per_hour_at_stake)}/h at stake", "grey70")
    out.append("\n")
    out.append(inert(verdict.detail, max_len=2000))
    return out


class HuntList(RowTable):
    """An alerts panel: (node, verdict) rows in hunt order. Feed it with `show(snapshot)`."""

    BINDINGS = [Binding("enter", "select_cursor", "Open node", show=True)]

    def __init__(self, **kwargs: object) -> None:
        super().__init__([(key, label, None) for key, label in COLUMNS], **kwargs)  # type: ignore[arg-type]
        self.pairs: dict[str, tuple[NodeView, VerdictView]] = {}
        self.now = 0.0

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
        self.show_nodes(snapshot.nodes, now)

    def show_nodes(self, nodes: Sequence[NodeView], now: float) -> None:
        pairs = hunt_order(nodes)
        self.now = now
        self.pairs = {_row_key((n.name, v.kind)): (n, v) for n, v in pairs}
        rows = [(_row_key((n.name, v.kind)), row_cells(n, v, now)) for n, v in pairs]
        self.sync(rows)
        self.set_order([key for key, _ in rows])

    def current_detail(self) -> Text | None:
        """The full evidence of the row under the cursor (None: no verdict)."""
        row = self.current_key()
        pair = None if row is None else self.pairs.get(row)
        return None if pair is None else detail_text(*pair, self.now)

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table is self:
            event.stop()
            self.post_message(OpenNode(_key_of(event.key)[0]))
