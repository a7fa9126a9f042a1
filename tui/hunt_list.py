"""The hunt list: every active verdict across the cluster, worst first.

Sorted by severity, then by dollars per hour at stake (`evaluation.verdicts.hunt_order`),
so the node burning the most money for the worst reason is on top. Enter posts
`OpenNode` for the selected row's node; the app opens the node screen. The first nine
rows are numbered (`#`): the digit, pressed anywhere on the overview, opens that row's
evidence (`evidence_at`), so a verdict read in the list is one key away. Announcing verdicts
that start is the app's (tui/announcer.py), whatever screen is on top.

Rows are keyed by (node, kind) and updated in place (a `RowTable`): the cursor stays on
its verdict while others come and go. A mass event (many nodes entering one verdict
together, grouped by the monitor: `evaluation.mass_events`) is one row, "41 nodes", its
members named in the evidence column; Enter on it opens its first node. A blind spot every
node shares (`cluster.shared_blind_spots`, judged by the monitor: `evaluation.shared_gaps`)
is one row after the nodes' verdicts, "16 nodes · blind", its evidence the fix; Enter on it
opens nothing (no one node has it more than another).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rich.text import Text
from textual.binding import Binding

from infertop.monitor.evaluation.mass_events import hunt_entries
from infertop.monitor.format import figure_forms, fmt_age, fmt_usd
from infertop.monitor.snapshot import NodeView, SharedBlindSpotView, Snapshot, VerdictGroupView, VerdictView
from infertop.tui.messages import OpenNode
from infertop.tui.row_table import FigureText, RowTable
from infertop.tui.text import inert

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
# (key, label, width, priority, justify): on a narrow panel the lowest priority goes
# first, whole (the detail line under the list says all of it); the evidence takes the
# room the others leave, cut with "…"
# (`#`: the row's number, its key; it stays whatever the width)
COLUMNS = (("number", "#", 1, 99, "right"), ("severity", "SEV", None, 60, "left"),
           ("node", "NODE", None, 100, "left"),
           ("kind", "VERDICT", None, 95, "left"), ("since", "FOR", 3, 50, "right"),
           ("stake", "STAKE $/H", 9, 90, "right"), ("detail", "EVIDENCE", None, 10, "left"))

Key = tuple[str, str]
# the rows a digit reaches: `1`–`9` on the overview open the evidence of the row with that
# number, wherever the focus is (OverviewScreen.action_hunt_evidence)
NUMBERED_ROWS = 9


def number_cell(index: int) -> Text:
    """The row's number (0-based `index`), the key that opens its evidence; blank past 9."""
    return Text(str(index + 1) if index < NUMBERED_ROWS else "", "bold cyan", justify="right")


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


def stake_cell(usd_per_hour: float | None) -> Text:
    """Dollars an hour at stake: shorter when the column is narrow ($84.66 → $85), never cut."""
    return FigureText(figure_forms(usd_per_hour, 2, money=True))


def row_cells(node: NodeView, verdict: VerdictView, now: float) -> tuple[Text, ...]:
    style = SEVERITY_STYLE.get(verdict.severity, "")
    age = None if verdict.since is None else max(now - verdict.since, 0.0)
    return (
        inert(verdict.severity, style),
        inert(node.name, max_len=64),
        inert(verdict.kind, style, max_len=24),
        Text(fmt_age(age), justify="right"),
        stake_cell(verdict.usd_per_hour_at_stake),
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
        stake_cell(group.usd_per_hour_at_stake),
        inert(group.summary, max_len=300),
    )


def spot_label(spot: SharedBlindSpotView) -> str:
    return f"{spot.nodes} node{'s' if spot.nodes != 1 else ''}"


def _spot_row_key(index: int, spot: SharedBlindSpotView) -> str:
    # no node opens from it: the label where a node name goes, marked as the cluster's
    return _row_key((f"{spot_label(spot)}\x1ecluster-{index}", "blind"))


def spot_cells(spot: SharedBlindSpotView) -> tuple[Text, ...]:
    style = SEVERITY_STYLE.get(spot.severity, "")
    return (
        inert(spot.severity, style),
        inert(spot_label(spot), "bold"),
        inert("blind", style),
        Text("", justify="right"),
        stake_cell(None),
        inert(spot.note, max_len=300),
    )


def spot_detail_text(spot: SharedBlindSpotView) -> Text:
    """A blind spot the fleet shares in full: who, the fix, every reason."""
    style = SEVERITY_STYLE.get(spot.severity, "")
    out = Text()
    out.append("blind", style)
    out.append(" on ")
    out.append(inert(f"{spot_label(spot)} ({'/'.join(spot.roles)})", "bold", max_len=200))
    out.append(f" · {spot.severity} · fleet-wide: no node sees it", "grey70")
    out.append("\n")
    out.append(inert(spot.note, max_len=2000))
    return out


def fmt_since(since: float | None, now: float) -> str:
    """When a verdict started, as a clock time in UTC (with the date when not today),
    and how long ago: "06:41:12 UTC (3m ago)"."""
    if since is None:
        return "unknown"
    at = dt.datetime.fromtimestamp(since, dt.UTC)
    today = dt.datetime.fromtimestamp(now, dt.UTC).date()
    clock = at.strftime("%H:%M:%S UTC") if at.date() == today else at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{clock} ({fmt_age(max(now - since, 0.0))} ago)"


def group_detail_text(group: VerdictGroupView, now: float) -> Text:
    """A mass event in full: what, since when, and every node it took (Enter opens the first)."""
    style = SEVERITY_STYLE.get(group.severity, "")
    out = Text()
    out.append(inert(group_label(group), "bold"))
    out.append(" ")
    out.append(inert(group.kind, style, max_len=24))
    out.append(f" · {group.severity} · since {fmt_since(group.since, now)}", "grey70")
    out.append("\n")
    out.append(inert(", ".join(group.nodes), max_len=4000))
    return out


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
    out.append("  (e: evidence against the pool)" if verdict.evidence else "  (e: evidence)", "grey50")
    return out


class HuntList(RowTable):
    """An alerts panel: (node, verdict) rows in hunt order. Feed it with `show(snapshot)`."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open node", show=True),
        # the row's verdict, its figures beside the pool's (every kind, issue 46)
        Binding("e", "evidence", "Evidence", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(COLUMNS, fit_to_width=True, flex="detail", **kwargs)  # type: ignore[arg-type]
        self._opens: dict[str, str] = {}  # row key → the node Enter opens
        self.pairs: dict[str, tuple[NodeView, VerdictView]] = {}  # single-verdict rows
        self.groups: dict[str, VerdictGroupView] = {}  # mass-event rows
        self.spots: dict[str, SharedBlindSpotView] = {}  # the cluster's shared blind spots
        self.now = 0.0
        self.snapshot_shown: Snapshot | None = None

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
        self.snapshot_shown = snapshot
        now = dt.datetime.fromisoformat(snapshot.taken_at).timestamp()
        self.show_nodes(snapshot.nodes, now, snapshot.verdict_groups, snapshot.cluster.shared_blind_spots)

    def show_nodes(
        self,
        nodes: Sequence[NodeView],
        now: float,
        groups: Sequence[VerdictGroupView] = (),
        spots: Sequence[SharedBlindSpotView] = (),
    ) -> None:
        rows: list[tuple[str, tuple[Text, ...]]] = []
        opens: dict[str, str] = {}
        pairs: dict[str, tuple[NodeView, VerdictView]] = {}
        group_rows: dict[str, VerdictGroupView] = {}
        self.now = now
        for entry in hunt_entries(nodes, groups):
            if isinstance(entry, VerdictGroupView):
                key = _group_row_key(entry)
                rows.append((key, group_cells(entry, now)))
                opens[key] = entry.nodes[0]
                group_rows[key] = entry
            else:
                node, verdict = entry
                key = _row_key((node.name, verdict.kind))
                rows.append((key, row_cells(node, verdict, now)))
                opens[key] = node.name
                pairs[key] = (node, verdict)
        # after every node's verdicts, as a node's blind verdict (no known money at stake)
        spot_rows = {_spot_row_key(i, spot): spot for i, spot in enumerate(spots)}
        rows.extend((key, spot_cells(spot)) for key, spot in spot_rows.items())
        self._opens, self.pairs, self.groups, self.spots = opens, pairs, group_rows, spot_rows
        rows = [(key, (number_cell(i), *cells)) for i, (key, cells) in enumerate(rows)]
        self.sync(rows)
        self.set_order([key for key, _ in rows])

    def current_detail(self) -> Text | None:
        """The full evidence of the row under the cursor (None: no verdict)."""
        row = self.current_key()
        if row is not None and row in self.groups:
            return group_detail_text(self.groups[row], self.now)
        if row is not None and row in self.spots:
            return spot_detail_text(self.spots[row])
        pair = None if row is None else self.pairs.get(row)
        return None if pair is None else detail_text(*pair, self.now)

    def action_evidence(self) -> None:
        row = self.current_key()
        pair = None if row is None else self.pairs.get(row)
        if pair is not None:
            from infertop.tui.evidence_screen import EvidenceScreen  # only when asked for

            self.app.push_screen(EvidenceScreen(*pair))

    def evidence_at(self, number: int) -> None:
        """The row numbered `number` (1-based, as the # column says): the cursor goes to it
        (its evidence in full under the list) and its verdict's evidence opens, as `e` on it."""
        order = self.displayed_order()
        if not 1 <= number <= min(NUMBERED_ROWS, len(order)):
            return
        self.move_cursor(number - 1)
        self.action_evidence()

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table is self:
            event.stop()
            if event.key in self.spots:
                return  # the whole fleet's: no one node to open
            self.post_message(OpenNode(self._opens.get(event.key, _key_of(event.key)[0])))
