"""The cluster overview: header, per-role roll-ups, plug-in panels, one row per node."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Footer, Input, Static

from monitor.snapshot import Snapshot
from tui.columns import SORTS, SortSpec
from tui.filtering import NodeFilter
from tui.frames import FrameScreen, FrameState
from tui.header import HeaderBar
from tui.messages import OpenNode
from tui.node_table import NodeTable
from tui.panels import SnapshotPanel, overview_panels
from tui.rollups import RollupStrip
from tui.row_table import RowTable


class OverviewScreen(FrameScreen):
    BINDINGS = [
        Binding("slash", "start_filter", "Filter",
                tooltip="Filter nodes by name, role, status or verdict (! inverts)"),
        Binding("escape", "clear_filter", "Clear filter", tooltip="Clear the filter"),
        Binding("s", "cycle_sort", "Sort", tooltip="Sort by the next column (worst first)"),
    ]

    def __init__(self, frames: FrameState, panels: list[Widget] | None = None) -> None:
        """`panels`: the plug-in panels to show; None = every registered one (`tui.panels`)."""
        super().__init__(frames, id="overview")
        self.node_filter = NodeFilter()
        self.sort_index = 0
        self._panels: list[Widget] = overview_panels() if panels is None else panels

    # -- layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        self.header_bar = HeaderBar(id="header")
        self.rollups = RollupStrip(id="rollups")
        self.table = NodeTable(id="nodes")
        self.empty = Static("waiting for the first samples…", id="empty")
        self.filter_input = Input(
            placeholder="filter by name, role, status or verdict (! inverts), Enter keeps it",
            id="filter",
        )
        yield self.header_bar
        yield self.rollups
        with Horizontal(id="panels") as row:
            row.display = bool(self._panels)
            yield from self._panels
        yield self.table
        yield self.empty
        yield self.filter_input
        yield Footer()

    def on_mount(self) -> None:
        self.filter_input.display = False
        self.header_bar.show(None)
        self.table.focus()

    # -- rendering ------------------------------------------------------------------

    @property
    def sort(self) -> SortSpec:
        return SORTS[self.sort_index]

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """Render one frame. The app calls this inside `batch_update()`."""
        self.snapshot = snapshot
        nodes = [n for n in snapshot.nodes if self.node_filter.matches(n)]
        self.table.show(nodes, self.sort)
        self.empty.display = not snapshot.nodes
        self.rollups.show(snapshot)
        for panel in self._panels:
            if isinstance(panel, SnapshotPanel):
                panel.show_snapshot(snapshot)
        self._show_header(shown=len(nodes))

    def _show_header(self, shown: int | None = None) -> None:
        self.header_bar.show(
            self.snapshot,
            paused=self.frames.paused,
            filter_text=self.node_filter.describe(),
            shown=shown if shown is not None else self.table.row_count,
            sort_label=self.sort.label,
            alerts=self.frames.alerts,
        )

    def rerender(self) -> None:
        """Draw the last frame again (after the filter or the sort changed)."""
        if self.snapshot is not None:
            with self.app.batch_update():
                self.show_snapshot(self.snapshot)

    # -- actions --------------------------------------------------------------------

    def action_start_filter(self) -> None:
        self.filter_input.display = True
        self.filter_input.focus()

    def action_clear_filter(self) -> None:
        self.filter_input.value = ""
        self.filter_input.display = False
        self.node_filter = NodeFilter()
        self.table.focus()
        self.rerender()

    def set_filter(self, query: str) -> None:
        self.node_filter = NodeFilter.parse(query)
        self.rerender()

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.rerender()

    def refresh_header(self) -> None:
        self._show_header()

    # -- events ---------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is self.filter_input:
            self.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self.filter_input:
            if not event.value.strip():
                self.filter_input.display = False
            self.table.focus()

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table is self.table:
            self.post_message(OpenNode(event.key))
