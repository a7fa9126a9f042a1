"""A DataTable whose rows are keyed and updated in place: only changed cells are touched.

`sync(rows)` makes the table show exactly `rows` (key → cells): rows that left are
removed, new ones added at the bottom, and in rows that stayed only the cells whose look
changed are rewritten. The caller wraps a tick's syncs in one `app.batch_update()`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.style import Style
from rich.text import Text
from textual._types import SegmentLines
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Signature = tuple[tuple[object, ...], ...]


def cell_signature(cell: Text) -> tuple[object, ...]:
    """What a cell looks like; `Text.__eq__` ignores the base style, which we change."""
    return (cell.plain, str(cell.style), tuple(cell.spans), cell.justify)


def _unique_keys(rows: Iterable[tuple[str, Sequence[Text]]]) -> list[tuple[str, Sequence[Text]]]:
    """Two rows with one key (two ports a broken source names alike) must not crash us."""
    seen: dict[str, int] = {}
    out = []
    for key, cells in rows:
        n = seen.get(key, 0)
        seen[key] = n + 1
        out.append((key if n == 0 else f"{key}#{n + 1}", cells))
    return out


class KeyedTable(DataTable[Text]):
    def __init__(
        self,
        columns: Sequence[tuple[str, str, int | None]],
        **kwargs: object,
    ) -> None:
        """`columns`: (key, label, width); a width of None fits the content."""
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._column_specs = list(columns)
        self._auto_width = {key for key, _, width in columns if width is None}
        self._shown: dict[str, Signature] = {}
        self.cells_updated = 0  # cells rewritten so far (tests and benchmarks read it)
        # row → column → (cell object, how it was drawn, its rendered lines); see _render_cell
        self._painted: dict[RowKey, dict[ColumnKey, tuple[object, tuple[object, ...], SegmentLines]]] = {}
        self._paint_generation = 0

    def on_mount(self) -> None:
        self._ensure_columns()

    def _ensure_columns(self) -> None:
        # a frame may arrive before this widget's Mount event has been handled
        if not self.columns:
            for key, label, width in self._column_specs:
                self.add_column(Text(label, justify="left"), width=width, key=key)

    @property
    def shown_keys(self) -> list[str]:
        return list(self._shown)

    def current_key(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return None if key.value is None else str(key.value)

    def sync(self, rows: Iterable[tuple[str, Sequence[Text]]]) -> None:
        self._ensure_columns()
        keys = [key for key, _, _ in self._column_specs]
        rows = _unique_keys(rows)
        wanted = {key for key, _ in rows}
        for gone in [k for k in self._shown if k not in wanted]:
            self.remove_row(gone)
            del self._shown[gone]
        replaced = False
        for row_key, cells in rows:
            signature = tuple(cell_signature(c) for c in cells)
            previous = self._shown.get(row_key)
            if previous is None:
                self.add_row(*cells, key=row_key)
            elif previous != signature:
                for key, cell, old, new in zip(keys, cells, previous, signature, strict=True):
                    if old != new:
                        if key in self._auto_width:
                            self.update_cell(row_key, key, cell, update_width=True)
                        else:
                            # what update_cell does, less its refresh() per cell (~600 cells
                            # a frame at 128 nodes): one refresh below covers them all
                            self._data[RowKey(row_key)][ColumnKey(key)] = cell
                            replaced = True
                        self.cells_updated += 1
            self._shown[row_key] = signature
        if replaced:
            self._update_count += 1
            self.refresh()

    def displayed_order(self) -> list[str]:
        return [str(row.key.value) for row in self.ordered_rows]

    def keep_cursor_on(self, key: str | None) -> None:
        if key is not None and key in self._shown:
            row = self.get_row_index(RowKey(key))
            if row != self.cursor_row:
                self.move_cursor(row=row, animate=False)

    # -- painting ---------------------------------------------------------------------
    # DataTable keys its cell cache on a table-wide update counter, so one changed cell
    # makes every visible cell render again through Rich (~60 µs each: ~30 ms a frame for
    # a 128-node overview). Keyed by the cell object itself, a cell renders again only
    # when `sync` replaced it, or its row, width or style changed. Measured in
    # benchmarks/bench_tui.py.

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        column_key = self._column_locations.get_key(column_index) if column_index >= 0 else None
        row_key = self._header_row_key if row_index == -1 else self._row_locations.get_key(row_index)
        if row_key is None or column_key is None:  # row labels (unused here)
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cell = self.columns[column_key].label if row_index == -1 else self._data[row_key][column_key]
        look = (row_index, base_style, width, cursor, hover, self._show_hover_cursor,
                self._pseudo_class_state, self._paint_generation)
        row_cache = self._painted.setdefault(row_key, {})
        hit = row_cache.get(column_key)
        if hit is not None and hit[0] is cell and hit[1] == look:
            return hit[2]
        lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_cache[column_key] = (cell, look, lines)
        return lines

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._painted.clear()
        self._paint_generation += 1

    def notify_style_update(self) -> None:
        # DataTable clears its own caches here without `_clear_caches`: a theme change
        self._painted.clear()
        self._paint_generation += 1
        super().notify_style_update()

    def remove_row(self, row_key: RowKey | str) -> None:
        self._painted.pop(row_key if isinstance(row_key, RowKey) else RowKey(row_key), None)
        super().remove_row(row_key)
