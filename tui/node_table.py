"""The overview's node table: one row per node, updated in place, sorted on demand.

Rows are keyed by node name (see `RowTable`); rows are reordered only when the order
changes beyond the sort's margin (`columns.sort_order`), and the cursor stays on the node
it was on. NODE is frozen at the left; on a narrow terminal the lowest-priority columns
are left out (`fit_to_width`), or, in the wide mode, every column is shown and ←/→
scroll the ones after NODE.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from textual.binding import Binding

from infertop.monitor.snapshot import NodeView
from infertop.tui.columns import COLUMNS, SortSpec, name_cell, render_row, sort_arrow, sort_order
from infertop.tui.row_table import RowTable


class NodeTable(RowTable):
    BINDINGS = [
        Binding("enter", "select_cursor", "Open node", show=True,
                tooltip="Open the node under the cursor (GPUs, ports, engine)"),
        Binding("left", "scroll_left", "Scroll left", show=False,
                tooltip="Scroll the columns left (after w)"),
        Binding("right", "scroll_right", "Scroll right", show=False,
                tooltip="Scroll the columns right (after w)"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__([(c.key, c.label, c.width, c.priority, c.justify) for c in COLUMNS],
                         frozen=1, fit_to_width=True, **kwargs)  # type: ignore[arg-type]
        self._sorted_by: SortSpec | None = None
        self._name_widths: dict[str, int] = {}  # node name → its cell's width

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # sideways scrolling only in the wide mode: fitted columns have nothing to scroll
        if action in ("scroll_left", "scroll_right"):
            return not self.fit_to_width
        return True

    def show(self, nodes: Sequence[NodeView], sort: SortSpec) -> None:
        """Make the table show exactly `nodes` (already filtered), sorted by `sort`. Only
        the rows on screen are rendered (`sync_lazy`): the name column's width is known
        from the names alone."""
        by_name = {node.name: node for node in nodes}
        # the same sort as last frame: keep the shown order unless it truly changed
        previous = self.displayed_order() if sort == self._sorted_by else None
        order = sort_order(list(nodes), sort, previous=previous)
        self._sorted_by = sort
        self.set_marker(sort.column, sort_arrow(sort))
        self.sync_lazy(
            [(name, partial(render_row, by_name[name])) for name in order],
            widths={"name": max(self._name_cell_widths(nodes), default=0)},
        )

    def _name_cell_widths(self, nodes: Sequence[NodeView]) -> list[int]:
        """The widths of the nodes' name cells; a name made inert and measured once, not
        every frame (names seldom change; the memo holds this frame's names only)."""
        known = self._name_widths
        widths = {n.name: known[n.name] if n.name in known else name_cell(n).cell_len for n in nodes}
        self._name_widths = widths
        return list(widths.values())
