"""A keyed table drawn with Textual's Line API: only the rows on screen are rendered.

`RowTable` is a `ScrollView` whose `render_line(y)` draws line 0 as the column header and
every other line as one row (toolong draws its log the same way). Rows are keyed;
`sync(rows)` makes the table hold exactly `rows` (key → cells), keeping the order of rows
that stay and appending new ones, and `set_order(keys)` reorders them. A row's line is
cached (`textual.cache.LRUCache`) under what it looks like: its cells, the column widths,
the cursor and focus state; and so is each cell's piece of a line, under the cell's look
and width. So a frame where 128 rows changed costs the ~40 rows that are on screen, of
those only the cells that changed are rendered again, and a frame where nothing changed
costs nothing. Public Textual API only.

Keys: ↑/↓, PgUp/PgDn, Home/End move the cursor; Enter posts `RowSelected`; clicking a row
moves the cursor there, clicking the row under the cursor again selects it (as Enter);
clicking a column's header posts `HeaderClicked`.

Fit: the first `frozen` columns never scroll away sideways (←/→ scroll the rest). With
`fit_to_width`, columns that do not fit the widget are left out, lowest `priority`
first, so nothing is cut by the screen's edge (`hidden_columns` names them), and a
`flex` column (text) takes the room left, cut with "…". A figure (`FigureText`) wider
than its column is written shorter by the one rule (`monitor.format.fit_forms`:
fewer decimals, SI prefixes), never cut; a right-justified cell (a number) never loses
characters: its column widens to hold its shortest form (and may then be left out whole).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rich.console import JustifyMethod as Justify
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from infertop.monitor.format import fit_forms
from infertop.tui.line_diff import changed_end, join_runs

Cells = tuple[Text, ...]
RowMaker = Callable[[], Sequence[Text]]  # makes a row's cells when the row is drawn
T = TypeVar("T")
Signature = tuple[tuple[object, ...], ...]
GAP = 1  # blank cells between columns
_NO_CELL = Text()
_PLAIN = Style.null()


class FigureText(Text):
    """A figure's cell: its text is the most precise form (`forms[0]`); a narrower column
    draws the most precise form that fits (`monitor.format.figure_forms`)."""

    def __init__(self, forms: Sequence[str], style: str | Style = "") -> None:
        super().__init__(forms[0], style=style, justify="right", no_wrap=True)
        self.forms = tuple(forms)

    @property
    def shortest(self) -> int:
        return min(len(form) for form in self.forms)

    def fitted(self, width: int) -> Text:
        """This figure in `width` cells by the one rule (its shortest form if none fits)."""
        form = fit_forms(self.forms, width) or min(self.forms, key=len)
        text = Text(form, style=self.style, justify="right", no_wrap=True)
        for span in self.spans:  # a style over the whole figure keeps covering it
            if span.start == 0 and span.end >= len(self.plain):
                text.stylize(span.style)
        return text


FLEX_MIN = 12  # a flex column narrower than this is left out rather than shown as "…"


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None  # None: as wide as the widest cell
    priority: int = 0  # with `fit_to_width`, the lowest-priority columns are left out first
    justify: Justify = "left"  # the label's place over the column (numbers: "right")


def cell_signature(cell: Text) -> tuple[object, ...]:
    """What a cell looks like; `Text.__eq__` ignores the base style, which we change."""
    return (cell.plain, str(cell.style), tuple(cell.spans), cell.justify)


_NO_CELL_LOOK = cell_signature(_NO_CELL)


def unique_keys(rows: Iterable[tuple[str, T]]) -> list[tuple[str, T]]:
    """Two rows with one key (two ports a broken source names alike) must not crash us."""
    seen: dict[str, int] = {}
    out = []
    for key, row in rows:
        n = seen.get(key, 0)
        seen[key] = n + 1
        out.append((key if n == 0 else f"{key}#{n + 1}", row))
    return out


def _padded(plain: str, spare: int, justify: object) -> str:
    if justify == "right":
        return " " * spare + plain
    if justify == "center":
        return " " * (spare // 2) + plain + " " * (spare - spare // 2)
    return plain + " " * spare


def fit_cell(cell: Text, width: int) -> Text:
    """The cell cut or padded to exactly `width` cells, honouring its justification."""
    fitted = cell.copy()
    fitted.no_wrap = True
    if fitted.cell_len > width:
        fitted.truncate(width, overflow="ellipsis")
    spare = width - fitted.cell_len
    if spare > 0:
        if cell.justify == "right":
            fitted.pad_left(spare)
        elif cell.justify == "center":
            fitted.pad_left(spare // 2)
            fitted.pad_right(spare - spare // 2)
        else:
            fitted.pad_right(spare)
    return fitted


class RowTable(ScrollView, can_focus=True):
    """A table of keyed rows of Rich `Text` cells; see the module docstring."""

    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
    }
    RowTable > .row-table--header {
        text-style: bold;
        background: $panel;
        color: $foreground;
    }
    RowTable > .row-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: bold;
    }
    RowTable > .row-table--cursor-blurred {
        background: $block-cursor-blurred-background;
    }
    """
    COMPONENT_CLASSES = {"row-table--header", "row-table--cursor", "row-table--cursor-blurred"}
    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, init=False)

    class _RowMessage(Message):
        def __init__(self, table: RowTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    class RowHighlighted(_RowMessage):
        """The cursor moved onto the row `key`."""

    class RowSelected(_RowMessage):
        """Enter (or a second click) on the row `key`."""

    class ColumnsChanged(Message):
        """The columns shown changed (the width changed): who says which are hidden redraws."""

        def __init__(self, table: RowTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> RowTable:
            return self.table

    class HeaderClicked(Message):
        """A click on the header of the column `column` (its key)."""

        def __init__(self, table: RowTable, column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> RowTable:
            return self.table

    def __init__(
        self,
        columns: Sequence[tuple[str, str, int | None] | tuple[str, str, int | None, int]
                          | tuple[str, str, int | None, int, Justify]],
        *,
        frozen: int = 0,
        fit_to_width: bool = False,
        flex: str | None = None,
        page_keys: bool = True,
        **kwargs: object,
    ) -> None:
        """`columns`: (key, label, width[, priority[, justify]]); a width of None fits the content.
        `frozen`: how many leading columns stay put when the rest scroll sideways.
        `flex`: the key of a text column that takes the room the others leave (with
        `fit_to_width`), its cells cut with "…".
        `page_keys`: PgUp/PgDn/Home/End move the cursor; False leaves them to the page
        the table sits in (a short table on a long screen: the node screen's)."""
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.columns = [Column(*c) for c in columns]
        self.flex = None if flex is None else [c.key for c in self.columns].index(flex)
        self.page_keys = page_keys
        self.frozen = frozen
        self.fit_to_width = fit_to_width
        self._visible = list(range(len(self.columns)))
        self._markers: dict[str, str] = {}  # column key → a mark after its label (▲/▼)
        self._grown: dict[int, int] = {}  # widths that numbers wider than the column forced
        self._column_index = {c.key: i for i, c in enumerate(self.columns)}
        self._cells: dict[str, Cells] = {}
        self._shown: dict[str, Signature] = {}
        self._order: list[str] = []
        self._pending: dict[str, RowMaker] = {}  # rows whose cells are made when drawn
        self._width_hints: dict[int, int] = {}  # content widths given with lazy rows
        self._widths = [c.width if c.width is not None else len(c.label) for c in self.columns]
        self._lines: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)
        # a cell's segments at a width under a row's style: an unchanged cell of a
        # changed row is not rendered again
        self._cell_segments: LRUCache[tuple[object, ...], list[Segment]] = LRUCache(8192)
        self._paint_style: Style | None = None  # the widget's style during one paint
        self._cells_updated = 0
        self.lines_rendered = 0  # row lines rendered through Rich so far (the cache's misses)
        # the strip last drawn on each line of the widget: a frame that only changed cells
        # repaints the cells that differ from it (tui.line_diff), not the whole table
        self._drawn: dict[int, Strip] = {}

    # -- contents ---------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def shown_keys(self) -> list[str]:
        return list(self._order)

    def displayed_order(self) -> list[str]:
        return list(self._order)

    def keys_on_screen(self) -> list[str]:
        """The rows the table's scroll position shows now."""
        top = round(self.scroll_offset.y)
        return self._order[top:top + self._rows_on_screen()]

    @property
    def cells_updated(self) -> int:
        """Cells rewritten so far (tests read it; it makes every row not yet made)."""
        for key in list(self._pending):
            self._made(key)
        return self._cells_updated

    def get_cell(self, key: str, column: str) -> Text:
        return self._made(key)[self._column_index[column]]

    def get_row(self, key: str) -> Cells:
        return self._made(key)

    def row_index(self, key: str) -> int:
        return self._order.index(key)

    def current_key(self) -> str | None:
        return self._order[self.cursor_row] if self._order else None

    def sync_lazy(self, rows: Sequence[tuple[str, RowMaker]], widths: Mapping[str, int]) -> None:
        """Hold exactly `rows`, in this order; a row's cells are made only when it is drawn
        (or read), so a frame of 128 changed rows costs the ~40 on screen. `widths`: the
        content widths of the columns that fit their content, known without making every
        row's cells."""
        keep = self.current_key()
        fresh = unique_keys(rows)
        order = [key for key, _ in fresh]
        wanted = set(order)
        for gone in [k for k in self._cells if k not in wanted]:
            del self._cells[gone]
            del self._shown[gone]
        self._pending = dict(fresh)
        self._width_hints = {self._column_index[c]: w for c, w in widths.items()}
        same_rows = order == self._order
        self._order = order
        self._contents_changed(keep, changed=order if same_rows else None)

    def _made(self, key: str) -> Cells:
        """The row's cells, made now if they were left for when it is drawn."""
        maker = self._pending.pop(key, None)
        if maker is not None:
            cells = tuple(maker())
            signature = tuple(cell_signature(c) for c in cells)
            previous = self._shown.get(key)
            if previous != signature:
                self._cells_updated += len(cells) if previous is None else sum(
                    a != b for a, b in zip(previous, signature, strict=False))
                self._cells[key] = cells
                self._shown[key] = signature
                if self._grow_for(cells):
                    self._contents_changed(self.current_key())
        return self._cells[key]

    def _grow_for(self, cells: Sequence[Text]) -> bool:
        """Widen fixed columns for numbers that would not fit: a number is shown whole or
        not at all, never cut. True when a column grew."""
        grew = False
        for i, cell in enumerate(cells[: len(self.columns)]):
            width = self.columns[i].width
            if width is None or cell.justify != "right":
                continue
            need = cell.shortest if isinstance(cell, FigureText) else cell.cell_len
            if need > max(width, self._grown.get(i, 0)):
                self._grown[i] = need
                grew = True
        return grew

    def sync(self, rows: Iterable[tuple[str, Sequence[Text]]]) -> None:
        """Hold exactly `rows`: rows that left go, new ones are appended, and only cells
        whose look changed count as changed (a repaint happens only then)."""
        keep = self.current_key()
        self._pending.clear()
        fresh = [(key, tuple(cells)) for key, cells in unique_keys(rows)]
        wanted = {key for key, _ in fresh}
        changed = False
        moved = False  # rows came or went: the whole table is drawn again
        changed_keys: list[str] = []
        if len(wanted) != len(self._order) or any(k not in wanted for k in self._order):
            moved = True
            self._order = [k for k in self._order if k in wanted]
            for gone in [k for k in self._cells if k not in wanted]:
                del self._cells[gone]
                del self._shown[gone]
            changed = True
        for key, cells in fresh:
            signature = tuple(cell_signature(c) for c in cells)
            previous = self._shown.get(key)
            if previous == signature:
                continue
            if previous is None:
                self._order.append(key)
                self._cells_updated += len(cells)
                moved = True
            else:
                self._cells_updated += sum(a != b for a, b in zip(previous, signature, strict=False))
            self._cells[key] = cells
            self._shown[key] = signature
            self._grow_for(cells)
            changed = True
            changed_keys.append(key)
        if changed:
            self._contents_changed(keep, changed=None if moved else changed_keys)

    def set_order(self, keys: Sequence[str]) -> None:
        """Show the rows in the order of `keys` (rows not named keep their place after)."""
        if list(keys) == self._order:
            return
        keep = self.current_key()
        named = [k for k in keys if k in self._cells or k in self._pending]
        rest = [k for k in self._order if k not in set(named)]
        self._order = named + rest
        self._contents_changed(keep)

    def set_marker(self, column: str | None, mark: str = "") -> None:
        """Show `mark` after one column's label (the sort arrow); None clears it."""
        markers = {column: mark} if column is not None and mark else {}
        if markers != self._markers:
            self._markers = markers
            self._contents_changed(self.current_key())

    def set_fit_to_width(self, fit: bool) -> None:
        self.fit_to_width = fit
        self._contents_changed(self.current_key())

    @property
    def visible_columns(self) -> list[str]:
        """The keys of the columns shown, left to right."""
        return [self.columns[i].key for i in self._visible]

    def column_spans(self) -> list[tuple[str, int, int]]:
        """(key, x, width) of each column shown, x from the table's left edge (before any
        sideways scroll): where a test reads a drawn cell back."""
        spans, x = [], 0
        for i in self._visible:
            spans.append((self.columns[i].key, x, self._widths[i]))
            x += self._widths[i] + GAP
        return spans

    @property
    def hidden_columns(self) -> list[str]:
        """The labels of the columns left out at this width, left to right."""
        shown = set(self._visible)
        return [c.label for i, c in enumerate(self.columns) if i not in shown]

    def clear(self) -> None:
        self._pending.clear()
        self._cells.clear()
        self._shown.clear()
        self._order = []
        self._contents_changed(None)

    def _contents_changed(self, keep: str | None, changed: Sequence[str] | None = None) -> None:
        """Lay the rows out again and repaint. `changed`: only these rows' cells changed
        (same rows, same order): unless that moved a column or the cursor, only the cells
        that now look different are repainted."""
        before = self._layout_look()
        self._fit_widths()
        self._choose_columns()
        self.virtual_size = Size(self._table_width(), len(self._order) + 1)
        self.keep_cursor_on(keep)
        if self._order and self.cursor_row >= len(self._order):
            self.cursor_row = len(self._order) - 1
        if changed is not None and self._layout_look() == before and self._drawn:
            self._repaint_rows(changed)
        else:
            self.refresh()

    def _layout_look(self) -> tuple[object, ...]:
        """What places every cell on screen: columns, widths, rows, cursor, scroll, size."""
        return (tuple(self._widths), tuple(self._visible), tuple(self._order), self.cursor_row,
                self.has_focus, self.scroll_offset, self.size, self.virtual_size,
                tuple(self._label(c) for c in self.columns))

    def _repaint_rows(self, keys: Sequence[str]) -> None:
        """Mark dirty only the spans of the lines on screen whose drawing changed."""
        width, height = self.size.width, self.size.height
        top = round(self.scroll_offset.y)
        place = {key: row for row, key in enumerate(self._order)}
        self._paint_style = self.rich_style
        try:
            for key in keys:
                row = place.get(key)
                if row is None:
                    continue
                y = row - top + 1
                if not 1 <= y < height:
                    continue
                end = changed_end(self._drawn.get(y), self.render_line(y), width)
                if end:
                    self.refresh(Region(0, y, end, 1))
        finally:
            self._paint_style = None

    def _label(self, column: Column) -> str:
        mark = self._markers.get(column.key)
        return f"{column.label}{mark}" if mark else column.label

    def _fit_widths(self) -> None:
        for i, column in enumerate(self.columns):
            label = len(self._label(column))
            if column.width is not None:
                self._widths[i] = max(column.width, self._grown.get(i, 0), label)
                continue
            self._widths[i] = max(label, self._content_width(i))

    def _content_width(self, i: int) -> int:
        widest = self._width_hints.get(i) if self._pending else None
        if widest is None:
            widest = max((cells[i].cell_len for cells in self._cells.values() if i < len(cells)),
                         default=0)
        return max(widest, len(self._label(self.columns[i])))

    def _choose_columns(self) -> None:
        """Every column, or with `fit_to_width` those that fit, dropping the lowest
        priority first (frozen columns always stay)."""
        shown = list(range(len(self.columns)))
        room = self.scrollable_content_region.width if self.fit_to_width else 0
        if self.fit_to_width and room > 0:
            droppable = sorted(
                (i for i in shown if i >= self.frozen),
                key=lambda i: (self.columns[i].priority, -i),
            )
            if self.flex is not None:
                # the flex column asks only for its least; it takes what is left after
                self._widths[self.flex] = min(self._widths[self.flex], FLEX_MIN)
            while droppable and self._width_of(shown) > room:
                shown.remove(droppable.pop(0))
            if self.flex is not None and self.flex in shown:
                others = [i for i in shown if i != self.flex]
                left = room - self._width_of(others) - GAP
                widest = self._content_width(self.flex)
                if left < min(FLEX_MIN, widest):
                    shown.remove(self.flex)
                else:
                    self._widths[self.flex] = min(left, widest)
        if shown != self._visible:
            self.post_message(self.ColumnsChanged(self))
        self._visible = shown

    def _width_of(self, indices: Sequence[int]) -> int:
        return sum(self._widths[i] for i in indices) + GAP * max(len(indices) - 1, 0)

    def _table_width(self) -> int:
        return self._width_of(self._visible)

    def _frozen_width(self) -> int:
        frozen = [i for i in self._visible if i < self.frozen]
        return self._width_of(frozen) + (GAP if frozen else 0)

    def on_resize(self, event: events.Resize) -> None:
        if self.fit_to_width:
            self._contents_changed(self.current_key())

    # -- cursor -----------------------------------------------------------------------

    def keep_cursor_on(self, key: str | None) -> None:
        if key is not None and (key in self._cells or key in self._pending):
            row = self._order.index(key)
            if row != self.cursor_row:
                self.move_cursor(row)

    def move_cursor(self, row: int) -> None:
        if self._order:
            self.cursor_row = max(0, min(row, len(self._order) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._scroll_to_row(new)
        self.refresh()
        key = self.current_key()
        if key is not None:
            self.post_message(self.RowHighlighted(self, key))

    def _rows_on_screen(self) -> int:
        # less the header line and a horizontal scrollbar, when the table is wider
        return max(self.scrollable_content_region.height - 1, 1)

    def _scroll_to_row(self, row: int) -> None:
        visible = self._rows_on_screen()
        top = round(self.scroll_offset.y)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.page_keys and action in ("page_up", "page_down", "first", "last"):
            return False  # the page's keys, not this table's
        return True

    def action_cursor_up(self) -> None:
        self.move_cursor(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(self.cursor_row - self._rows_on_screen())

    def action_page_down(self) -> None:
        self.move_cursor(self.cursor_row + self._rows_on_screen())

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self._order) - 1)

    def action_select_cursor(self) -> None:
        key = self.current_key()
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def column_at(self, x: int) -> str | None:
        """The key of the column drawn at screen column `x` of the widget, if any."""
        frozen = self._frozen_width()
        table_x = x if x < frozen else x + round(self.scroll_offset.x)
        left = 0
        for i in self._visible:
            right = left + self._widths[i]
            if left <= table_x < right:
                return self.columns[i].key
            left = right + GAP
        return None

    async def _on_click(self, event: events.Click) -> None:
        if event.y < 1:
            column = self.column_at(event.x)
            if column is not None:
                self.post_message(self.HeaderClicked(self, column))
            return
        row = round(self.scroll_offset.y) + event.y - 1
        if not 0 <= row < len(self._order):
            return
        if row == self.cursor_row:
            self.action_select_cursor()
        else:
            self.move_cursor(row)

    def _on_focus(self, event: events.Focus) -> None:
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        self._lines.clear()  # a theme change restyles every line
        self._cell_segments.clear()
        super().notify_style_update()

    # -- drawing ----------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        # the widget's style walks every ancestor: worked out once a paint, not once a line
        self._paint_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None

    def render_line(self, y: int) -> Strip:
        strip = self._render_line(y)
        self._drawn[y] = strip
        return strip

    def _render_line(self, y: int) -> Strip:
        row = self.scroll_offset.y + y - 1
        base = self._paint_style or self.rich_style
        if y == 0:
            style = self.get_component_rich_style("row-table--header")
            names = tuple(self._label(c) for c in self.columns)
            header = tuple(Text(n, justify=c.justify) for n, c in zip(names, self.columns, strict=True))
            return self._cached(("\x00header", names), header,
                                tuple(cell_signature(c) for c in header), style)
        if 0 <= row < len(self._order):
            key = self._order[row]
            style = base
            if row == self.cursor_row:
                cursor = "row-table--cursor" if self.has_focus else "row-table--cursor-blurred"
                style = style + self.get_component_rich_style(cursor)
            cells = self._made(key)
            signature = self._shown[key]
            return self._cached((key, signature), cells, signature, style)
        return Strip.blank(self.size.width, base)

    def _cached(self, key: tuple[object, ...], cells: Cells, signature: Signature, style: Style) -> Strip:
        # keyed by what the row looks like (its cells' signature), the widths, the style
        # and where it is cut (the widget's width, the sideways scroll)
        scroll_x, width = round(self.scroll_offset.x), self.size.width
        look = (*key, tuple(self._widths), tuple(self._visible), style, scroll_x, width)
        hit = self._lines.get(look)
        if hit is not None:
            return hit
        gap = Segment(" " * GAP, style)
        frozen = min(self._frozen_width(), width)
        table_width = self._table_width()
        # the line is cut where the frozen columns end (a run of one style is not joined
        # across the cut): they stay put, the rest scroll sideways behind them
        left: list[Segment] = []
        right: list[Segment] = []
        part = left
        for n, i in enumerate(self._visible):
            if n:
                self._join(part, [gap])
                if frozen and i >= self.frozen:
                    part = right
            if i < len(cells):
                self._join(part, self._cell(cells[i], signature[i], self._widths[i], style))
            else:
                self._join(part, self._cell(_NO_CELL, _NO_CELL_LOOK, self._widths[i], style))
        if not scroll_x and table_width <= width and (not frozen or right):
            # the whole line on screen; the header and the cursor keep their background to
            # the right edge
            pad = [Segment(" " * (width - table_width), style)] if width > table_width else []
            strip = Strip(left + right + pad, width)
        else:
            line = Strip(left + right, table_width)
            if not frozen:
                strip = line.crop_extend(scroll_x, scroll_x + width, style)
            else:
                rest = line.crop_extend(frozen + scroll_x, scroll_x + width, style)
                strip = Strip.join([line.crop(0, frozen), rest])
        self._lines.set(look, strip)
        self.lines_rendered += 1
        return strip

    @staticmethod
    def _join(segments: list[Segment], more: list[Segment]) -> None:
        """Append `more`, joining a run of one look across the seam: fewer segments, each
        written with its colour codes (`line_diff.join_runs`)."""
        if not more:
            return
        if segments:  # the seam: the last segment and the next cell's (`join_runs`)
            segments[-1:] = join_runs([segments[-1], *more])
            return
        segments += more

    def _cell(self, cell: Text, signature: tuple[object, ...], width: int, style: Style) -> list[Segment]:
        """The cell fitted to `width` as segments, under the row's `style`; cached under
        its look, width and that style."""
        look = (signature, width, style)
        hit = self._cell_segments.get(look)
        if hit is not None:
            return hit
        console = self.app.console
        if isinstance(cell, FigureText) and cell.cell_len > width:
            cell = cell.fitted(width)  # shorter by the one rule, never cut
        plain = cell.plain
        spare = width - cell.cell_len
        segments: list[Segment]
        if not cell.spans and spare >= 0 and "\n" not in plain:
            # one style over the whole cell: no Text to copy, pad and render
            text = _padded(plain, spare, cell.justify)
            segments = [Segment(text, console.get_style(cell.style, default=_PLAIN))] if text else []
        else:
            fitted = fit_cell(cell, width)
            if fitted.spans:
                segments = list(fitted.render(console))
            else:  # Text.render drops the base style of a text without spans
                segments = [Segment(fitted.plain, console.get_style(fitted.style, default=_PLAIN))]
        segments = join_runs(Segment.apply_style(segments, style))
        self._cell_segments.set(look, segments)
        return segments
