"""Lines of Rich `Text`, drawn as `Static(Group(*lines))` draws them, one line at a time.

A panel whose text is rebuilt every frame (the session panel: ~15 lines, ~11 of them
with a new figure) repainted the whole `Static` each frame: the group rendered through
Rich, split into lines, and its height measured by rendering it again. `TextLines`
renders each line on its own, wrapped to the widget's width, and keeps the result under
what the line looks like (`textual.cache.LRUCache`): an unchanged line costs nothing,
the height is the count of the rows rendered, and a new text asks for a layout only when
that count changes. Public Textual API only (the Line API: `render_line`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from infertop.tui.line_diff import changed_end, join_runs
from infertop.tui.row_table import cell_signature


def line_look(line: Text) -> tuple[object, ...]:
    """Everything that decides how a line is drawn (`Text.__eq__` ignores the styles): a
    table cell's look and how the line wraps."""
    return (*cell_signature(line), line.overflow, line.no_wrap, line.end, line.tab_size)


class TextLines(Widget):
    DEFAULT_CSS = """
    TextLines { height: auto; }
    """

    def __init__(self, lines: Sequence[Text] = (), **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._lines: list[Text] = list(lines)
        self._rendered: LRUCache[tuple[object, ...], list[Strip]] = LRUCache(256)
        self._rows: tuple[tuple[int, Style], list[Strip]] | None = None  # for a width and style
        self.lines_rendered = 0  # lines rendered through Rich so far (the cache's misses)

    @property
    def lines(self) -> list[Text]:
        return list(self._lines)

    @property
    def row_count(self) -> int:
        """Rows the lines take at the widget's width (a wrapped line counts for several)."""
        return len(self._rows_for(self.size.width))

    def update(self, lines: Sequence[Text]) -> None:
        """Show `lines`. A layout of the screen only when they take another number of rows;
        otherwise only the cells that changed are repainted (`line_diff`): the terminal
        is sent those, not the whole panel."""
        width = self.size.width
        before = list(self._rows_for(width)) if width > 0 else None
        self._lines = list(lines)
        self._rows = None
        after = self._rows_for(width) if width > 0 else None
        if before is None or after is None or len(before) != len(after):
            self.refresh(layout=True)
            return
        for y, (old, new) in enumerate(zip(before, after, strict=True)):
            end = changed_end(old, new, width)
            if end:
                self.refresh(Region(0, y, end, 1))

    def notify_style_update(self) -> None:
        self._rendered.clear()  # a theme change restyles every line
        self._rows = None
        super().notify_style_update()

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((line.cell_len for line in self._lines), default=0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows_for(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        rows = self._rows_for(width)
        if y < len(rows):
            return rows[y]
        return Strip.blank(width, self.visual_style.rich_style)

    def _rows_for(self, width: int) -> list[Strip]:
        style = self.visual_style.rich_style
        if self._rows is not None and self._rows[0] == (width, style):
            return self._rows[1]
        rows: list[Strip] = []
        for line in self._lines:
            rows += self._rows_of(line, width, style)
        self._rows = ((width, style), rows)
        return rows

    def _rows_of(self, line: Text, width: int, style: Style) -> list[Strip]:
        """The line's rows, as Static draws a group of lines: wrapped by Rich to `width`,
        the widget's style under every segment, cut to `width`."""
        look = (line_look(line), width, style)
        hit = self._rendered.get(look)
        if hit is not None:
            return hit
        if width <= 0:
            return []
        console = self.app.console
        options = self.app.console_options.update(highlight=False, width=width)
        # a run of one look is one segment: a chart drawn a span per character wrote
        # each character with its own colour codes (5x the bytes of the same line)
        segments = join_runs(Segment.apply_style(console.render(line, options), style))
        rows = [Strip(row) for row in Segment.split_and_crop_lines(
            segments, width, include_new_lines=False, pad=False)]
        self._rendered.set(look, rows)
        self.lines_rendered += 1
        return rows
