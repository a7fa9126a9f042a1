"""The cluster overview: header, per-role roll-ups, plug-in panels, one row per node."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Input, Static

from infertop.monitor.snapshot import Snapshot
from infertop.tui.columns import SORTABLE, SortSpec, sort_order, sort_spec
from infertop.tui.filtering import NodeFilter
from infertop.tui.fleet_map import FleetMap
from infertop.tui.footer import FitFooter
from infertop.tui.frames import FrameScreen, FrameState
from infertop.tui.header import HeaderBar
from infertop.tui.hunt_list import NUMBERED_ROWS, HuntList
from infertop.tui.messages import OpenNode
from infertop.tui.node_table import NodeTable
from infertop.tui.panels import GrowingPanel, SnapshotPanel, overview_panels
from infertop.tui.rollups import RollupStrip
from infertop.tui.row_table import RowTable
from infertop.tui.scoreboard_text import scoreboard_line

COMPACT_WIDTH = 120
COMPACT_HEIGHT = 30
NARROW_WIDTH = 110  # narrower: the session panel folds (the header keeps spend, $/h, idle)
# the node table (or fleet map) keeps at least its header and five node rows: the panels
# above it fold first (docs/tui.md, "Layouts per size")
NODE_TABLE_MIN_LINES = 6
COMPACT_PANEL_LINES = 10  # the panels' usual share: 10 lines when compact, else 35 %
PANEL_SHARE = 0.35
# from this many nodes the fleet map, not the node table, is what the overview opens on:
# the table no longer shows the fleet on one screen (`f` toggles either way)
FLEET_MAP_FROM_NODES = 64


def panel_lines(screen_lines: int, shared_lines: int, compact: bool, hunt_lines: int) -> int:
    """The lines the panels' row may take of the `shared_lines` it shares with the node
    table: its usual share of the screen, more when the hunt list needs them to show every
    verdict (`hunt_lines`: its rows, column header and frame), never so many that the
    node table keeps fewer than `NODE_TABLE_MIN_LINES`. The one size rule of the overview's
    middle; the hunt list says "+N more" for what even this leaves out."""
    usual = COMPACT_PANEL_LINES if compact else int(screen_lines * PANEL_SHARE)
    return max(min(max(usual, hunt_lines), shared_lines - NODE_TABLE_MIN_LINES), 0)


class OverviewScreen(FrameScreen):
    BINDINGS = [
        Binding("slash", "start_filter", "Filter",
                tooltip="Filter nodes by name, role, status or verdict (! inverts)"),
        Binding("escape", "clear_filter", "Clear filter", tooltip="Clear the filter"),
        Binding("greater_than_sign", "sort_next", "Sort →",
                tooltip="Sort by the next column, worst first"),
        Binding("less_than_sign", "sort_previous", "Sort ←", show=False,
                tooltip="Sort by the column to the left"),
        Binding("r", "sort_reverse", "Reverse", tooltip="Reverse the sort"),
        Binding("s", "sort_hunt", "Worst first", show=False,
                tooltip="Sort by severity, then $/h at stake"),
        Binding("f", "toggle_map", "Fleet map", show=False,
                tooltip="The fleet map (a cell per node, grouped) or the node table"),
        Binding("e", "evidence", "Evidence", show=False,
                tooltip="The evidence of the verdict under the cursor (the node's worst one)"),
        Binding("w", "toggle_wide", "All columns", show=False,
                tooltip="All columns (←/→ scroll; NODE stays) or those that fit"),
        # the hunt list's numbered rows: one key from the overview to a verdict's evidence,
        # wherever the focus is (the help lists them once: tui/help_screen.py)
        *(Binding(str(n), f"hunt_evidence({n})", "Evidence of row", show=False, key_display="1–9",
                  tooltip="The evidence of the hunt list's row with that number (its # column)")
          for n in range(1, NUMBERED_ROWS + 1)),
        # Textual's own focus keys, said here so that the help lists them
        Binding("tab", "app.focus_next", "Next pane", show=False,
                tooltip="Move to the next pane (node table → hunt list)"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False,
                tooltip="Move to the previous pane"),
    ]

    def __init__(self, frames: FrameState, panels: list[Widget] | None = None) -> None:
        """`panels`: the plug-in panels to show; None = every registered one (`tui.panels`)."""
        super().__init__(frames, id="overview")
        self.node_filter = NodeFilter()
        self.sort = sort_spec(None)
        self._panels: list[Widget] = overview_panels() if panels is None else panels
        self._scoreboard_plain: str | None = None
        self.map_chosen: bool | None = None  # `f` pressed: the user's choice; None: by size
        self.back_to_table = False  # a node screen was opened from here
        self._panels_lines: int | None = None  # the panels' row's lines (`panel_lines`)

    # -- layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        self.header_bar = HeaderBar(id="header")
        self.rollups = RollupStrip(id="rollups")
        self.table = NodeTable(id="nodes")
        self.fleet_map = FleetMap(id="fleet-map")
        self.empty = Static("waiting for the first samples…", id="empty")
        self.filter_input = Input(
            placeholder="filter by name, role, status or verdict (! inverts), Enter keeps it",
            id="filter",
        )
        self.scoreboard_line = Static(id="scoreboard-line")
        yield self.header_bar
        yield self.rollups
        yield self.scoreboard_line
        with Horizontal(id="panels") as row:
            row.display = bool(self._panels)
            yield from self._panels
        yield self.table
        yield self.fleet_map
        yield self.empty
        yield self.filter_input
        yield FitFooter()

    def on_resize(self, event: events.Resize) -> None:
        # a small terminal (80–120 columns or under 30 lines) is compact: the roll-ups
        # and panels give up lines so the node table keeps most of the screen; short
        # (under 30 lines), the roll-ups, the scoreboard line and the session panel fold;
        # narrow, the session panel does; compact, the hunt list's detail line (docs/tui.md)
        width, height = event.size
        self.set_class(width < COMPACT_WIDTH or height < COMPACT_HEIGHT, "compact")
        self.set_class(height < COMPACT_HEIGHT, "short")
        self.set_class(width < NARROW_WIDTH, "narrow")
        # folded here, not by a CSS rule: the header above them kept one line of its
        # three when they were hidden by the stylesheet
        self.rollups.display = self.scoreboard_line.display = height >= COMPACT_HEIGHT
        self.call_after_refresh(self._fit_panels)

    def _fit_panels(self) -> None:
        """Give the panels' row its lines by `panel_lines`, from the layout just drawn (the
        header's height changes with the lag warning, the hunt list's with its rows)."""
        panels = self.query_one("#panels")
        if not panels.display or not self.size.height:
            return
        fixed = sum(w.outer_size.height for w in self.children
                    if w.display and w not in (panels, self.table, self.fleet_map, self.empty))
        shared = self.size.height - fixed
        compact = self.has_class("compact")
        growing = [p for p in self._panels if isinstance(p, GrowingPanel) and p.display]
        needed = max((p.lines_wanted() for p in growing), default=0)
        lines = panel_lines(self.size.height, shared, compact, needed)
        if lines != self._panels_lines:  # a style set, even the same, lays the screen out
            self._panels_lines = lines
            panels.styles.max_height = lines
        for panel in growing:
            panel.fit_in(lines)

    def on_mount(self) -> None:
        self.filter_input.display = False
        self.fleet_map.display = False
        self.header_bar.show(None)
        self.table.focus()

    # -- rendering ------------------------------------------------------------------

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """Render one frame. The app calls this inside `batch_update()`."""
        self.snapshot = snapshot
        nodes = [n for n in snapshot.nodes if self.node_filter.matches(n)]
        self._choose_view(len(snapshot.nodes))
        if self.map_shown:
            # the table is not drawn meanwhile: `f` draws it again from this frame
            self.fleet_map.show(nodes, sort_order(nodes, self.sort) if self.sort.column else None)
        else:
            self.table.show(nodes, self.sort)
        self.empty.display = not snapshot.nodes
        self.rollups.show(snapshot)
        line = scoreboard_line(snapshot, self.scoreboard_line.content_region.width or None)
        if line.plain != self._scoreboard_plain:  # an unchanged line is not redrawn
            self._scoreboard_plain = line.plain
            self.scoreboard_line.update(line, layout=False)  # one line, always: no reflow
        for panel in self._panels:
            if isinstance(panel, SnapshotPanel):
                panel.show_snapshot(snapshot)
        self._show_header(shown=len(nodes))
        self.call_after_refresh(self._fit_panels)  # its rows may have come or gone

    def _show_header(self, shown: int | None = None) -> None:
        self.header_bar.show(
            self.snapshot,
            paused=self.frames.paused,
            filter_text=self.node_filter.describe(),
            shown=shown if shown is not None else (
                self.fleet_map.cell_count if self.map_shown else self.table.row_count),
            sort_label=self.sort.label,
            alerts=self.frames.alerts,
            hidden=() if self.map_shown else self.table.hidden_columns,
            news=self.frames.news,
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
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        self.filter_input.value = ""
        self.filter_input.display = False
        self.node_filter = NodeFilter()
        self.main_view().focus()
        self.refresh_bindings()
        self.rerender()

    def set_filter(self, query: str) -> None:
        self.node_filter = NodeFilter.parse(query)
        self.refresh_bindings()
        self.rerender()

    def set_sort(self, spec: SortSpec) -> None:
        self.sort = spec
        self.refresh_bindings()  # `r` is offered only once there is a sort to reverse
        self.rerender()
        # a new order is read from its top (the worst first): the cursor left on a node
        # further down would scroll the rows above it, the worst among them, out of sight
        self.table.move_cursor(0)
        self.table.scroll_home(animate=False)
        self.fleet_map.action_first()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":  # offered (and in the footer) only with a filter to clear
            return bool(self.filter_input.display or self.node_filter.describe())
        if action == "sort_reverse":
            return self.sort.column is not None
        if action == "toggle_wide":  # the map has no columns
            return not self.map_shown
        if action == "hunt_evidence":
            # a digit the app binds itself stays the app's (a replay's `9`: the last frame)
            digit = str(parameters[0]) if parameters else ""
            return not any(isinstance(b, Binding) and b.key == digit for b in self.app.BINDINGS)
        return True

    def sort_by(self, column: str | None) -> None:
        """Sort by `column`, worst first; the column already sorted by is reversed."""
        if column is not None and column == self.sort.column:
            self.set_sort(sort_spec(column, not self.sort.reverse))
        else:
            self.set_sort(sort_spec(column))

    def _step_sort(self, step: int) -> None:
        # the sortable columns in the order they are drawn, after the layout's order
        keys: list[str | None] = [None, *SORTABLE]
        at = keys.index(self.sort.column) if self.sort.column in keys else 0
        self.set_sort(sort_spec(keys[(at + step) % len(keys)]))

    def action_sort_next(self) -> None:
        self._step_sort(1)

    def action_sort_previous(self) -> None:
        self._step_sort(-1)

    def action_sort_reverse(self) -> None:
        if self.sort.column is not None:
            self.set_sort(sort_spec(self.sort.column, not self.sort.reverse))

    def action_sort_hunt(self) -> None:
        self.set_sort(sort_spec("verdicts"))

    # -- the fleet map --------------------------------------------------------------

    @property
    def map_shown(self) -> bool:
        return bool(self.fleet_map.display)

    def nodes_in_view(self) -> list[str]:
        # the fleet map shows every node as a cell: no node there is in view in detail
        return [] if self.map_shown else self.table.keys_on_screen()

    def main_view(self) -> NodeTable | FleetMap:
        return self.fleet_map if self.map_shown else self.table

    def _choose_view(self, nodes: int) -> None:
        wanted = self.map_chosen if self.map_chosen is not None else nodes >= FLEET_MAP_FROM_NODES
        if wanted != self.map_shown:
            focused = self.focused in (self.table, self.fleet_map)
            self.fleet_map.display = wanted
            self.table.display = not wanted
            if focused or self.focused is None:
                self.main_view().focus()

    def action_toggle_map(self) -> None:
        self.map_chosen = not self.map_shown
        self._choose_view(0)
        self.refresh_bindings()
        self.rerender()

    def action_toggle_wide(self) -> None:
        self.table.set_fit_to_width(not self.table.fit_to_width)
        self.notify("every column: ←/→ scroll them" if not self.table.fit_to_width
                    else "only the columns that fit", timeout=2)

    def refresh_header(self) -> None:
        self._show_header()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self.back_to_table:
            # back from a node screen (opened from the table or the hunt list): the keys
            # go to the node table again, where the next Tab starts from
            self.back_to_table = False
            self.main_view().focus()

    # -- events ---------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is self.filter_input:
            self.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self.filter_input:
            if not event.value.strip():
                self.filter_input.display = False
            self.main_view().focus()

    def on_row_table_columns_changed(self, event: RowTable.ColumnsChanged) -> None:
        if event.table is self.table and self.snapshot is not None and not self.map_shown:
            # it says how many columns are hidden; after this refresh, not inside the
            # table's layout (a header shown there kept its old height)
            self.call_after_refresh(self._show_header, self.table.row_count)

    def on_row_table_header_clicked(self, event: RowTable.HeaderClicked) -> None:
        if event.table is self.table and event.column in SORTABLE:
            event.stop()
            self.sort_by(event.column)

    def on_fleet_map_node_chosen(self, event: FleetMap.NodeChosen) -> None:
        self.post_message(OpenNode(event.key))

    def action_evidence(self) -> None:
        """The node under the cursor: its worst verdict's evidence (the hunt list's own `e`
        opens the verdict of its row)."""
        key = self.table.current_key() if not self.map_shown else self.fleet_map.current_key()
        node = next((n for n in self.snapshot.nodes if n.name == key), None) if self.snapshot else None
        if node is None:
            return
        verdict = next((v for v in node.verdicts if not v.pending), None)
        if verdict is None:
            self.notify(f"{node.name}: no verdict to show evidence for", timeout=3)
            return
        from infertop.tui.evidence_screen import EvidenceScreen  # only when asked for

        self.app.push_screen(EvidenceScreen(node, verdict))

    def action_hunt_evidence(self, number: int) -> None:
        """`1`–`9`: the evidence of the hunt list's row with that number."""
        for hunt in self.query(HuntList):
            hunt.evidence_at(number)

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table is self.table:
            self.post_message(OpenNode(event.key))
