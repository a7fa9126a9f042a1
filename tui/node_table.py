"""The overview's node table: one row per node, updated in place, sorted on demand.

Rows are keyed by node name (see `RowTable`); rows are reordered only when the order
changes, and the cursor stays on the node it was on.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from textual.binding import Binding

from monitor.snapshot import NodeView
from tui.columns import COLUMNS, SortSpec, name_cell, render_row, sort_order
from tui.row_table import RowTable


class NodeTable(RowTable):
    BINDINGS = [
        Binding("enter", "select_cursor", "Open node", show=True,
                tooltip="Open the node under the cursor (GPUs, ports, engine)"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__([(c.key, c.label, c.width) for c in COLUMNS], **kwargs)

    def show(self, nodes: Sequence[NodeView], sort: SortSpec) -> None:
        """Make the table show exactly `nodes` (already filtered), sorted by `sort`. Only
        the rows on screen are rendered (`sync_lazy`): the name column's width is known
        from the names alone."""
        by_name = {node.name: node for node in nodes}
        order = sort_order(list(nodes), sort)
        self.sync_lazy(
            [(name, partial(render_row, by_name[name])) for name in order],
            widths={"name": max((name_cell(n).cell_len for n in nodes), default=0)},
        )
