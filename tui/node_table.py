"""The overview's node table: one row per node, updated in place, sorted on demand.

Rows are keyed by node name (see `RowTable`); rows are reordered only when the order
changes, and the cursor stays on the node it was on.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.binding import Binding

from monitor.snapshot import NodeView
from tui.columns import COLUMNS, SortSpec, render_row, sort_order
from tui.row_table import RowTable


class NodeTable(RowTable):
    BINDINGS = [
        Binding("enter", "select_cursor", "Open node", show=True,
                tooltip="Open the node under the cursor (GPUs, ports, engine)"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__([(c.key, c.label, c.width) for c in COLUMNS], **kwargs)

    def show(self, nodes: Sequence[NodeView], sort: SortSpec) -> None:
        """Make the table show exactly `nodes` (already filtered), sorted by `sort`."""
        self.sync((node.name, render_row(node)) for node in nodes)
        self.set_order(sort_order(list(nodes), sort))
