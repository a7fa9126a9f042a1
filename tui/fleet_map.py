"""The fleet map: every node as one cell, grouped by pool and the layout's groups, drawn
with Textual's Line API (a `ScrollView` whose `render_line` draws only the lines on
screen, each cached under what it looks like, as `RowTable` does).

Line 0 stays put: the node under the cursor (its group, state and verdicts) and the
legend. The states come judged from `monitor.fleet_map`; here they only become a glyph
and a colour (`tui.fleet_map_picture`).

Keys: ←/→ the previous / next cell, ↑/↓ the nearest cell on the line above / below,
PgUp/PgDn, Home/End; Enter posts `NodeChosen` (the overview opens the node screen).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

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

from infertop.monitor.fleet_map import map_groups, node_map_state
from infertop.monitor.snapshot import NodeView
from infertop.tui.fleet_map_picture import STATE_STYLE, Atom, MapPicture, draw_map, legend
from infertop.tui.text import inert


class FleetMap(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    FleetMap {
        background: $surface;
        color: $foreground;
        height: 1fr;
    }
    FleetMap > .fleet-map--detail {
        background: $panel;
        color: $foreground;
    }
    FleetMap > .fleet-map--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: bold;
    }
    FleetMap > .fleet-map--cursor-blurred {
        background: $block-cursor-blurred-background;
    }
    """
    COMPONENT_CLASSES = {"fleet-map--detail", "fleet-map--cursor", "fleet-map--cursor-blurred"}
    BINDINGS = [
        Binding("left", "cursor_left", "Previous node", show=False,
                tooltip="The cell to the left (the previous node)"),
        Binding("right", "cursor_right", "Next node", show=False, tooltip="The cell to the right"),
        Binding("up", "cursor_up", "Up", show=False, tooltip="The nearest cell on the line above"),
        Binding("down", "cursor_down", "Down", show=False, tooltip="The nearest cell on the line below"),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select_cursor", "Open node", show=True,
                tooltip="Open the node under the cursor (GPUs, ports, engine)"),
    ]

    cursor: reactive[int] = reactive(0, init=False)  # index into the picture's cells

    class NodeChosen(Message):
        """Enter (or a click on the cell under the cursor) on the node `key`."""

        def __init__(self, fleet_map: FleetMap, key: str) -> None:
            super().__init__()
            self.fleet_map = fleet_map
            self.key = key

        @property
        def control(self) -> FleetMap:
            return self.fleet_map

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._node_views: dict[str, NodeView] = {}
        self._order: list[str] | None = None
        self._picture = MapPicture((), (), False)
        self._drawn_for: tuple[object, ...] | None = None
        self._index: dict[str, int] = {}
        self._line_cells: dict[int, list[tuple[int, int]]] = {}  # line → [(x, cell index)]
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(256)
        self._styles: dict[str, Style] = {}
        self.lines_rendered = 0  # lines rendered through Rich so far (the cache's misses)

    # -- contents ---------------------------------------------------------------------

    @property
    def folded(self) -> bool:
        return self._picture.folded

    @property
    def cell_count(self) -> int:
        return len(self._picture.cells)

    def current_key(self) -> str | None:
        cells = self._picture.cells
        return cells[self.cursor][0] if 0 <= self.cursor < len(cells) else None

    def position_of(self, key: str) -> tuple[int, int] | None:
        """(line, x) of a node's cell in the map (line 0: the first line under the detail)."""
        i = self._index.get(key)
        if i is None:
            return None
        _, line, x = self._picture.cells[i]
        return line, x

    def show(self, nodes: Sequence[NodeView], order: Sequence[str] | None = None) -> None:
        """Show exactly `nodes` (already filtered), cells in `order` within each group."""
        self._node_views = {n.name: n for n in nodes}
        self._order = list(order) if order is not None else None
        self._redraw()

    def _map_lines(self) -> int:
        return max(self.scrollable_content_region.height - 1, 1)

    def _redraw(self) -> None:
        if not self.size.height:
            return  # not laid out yet (just shown): placed once its size is known (on_resize)
        keep = self.current_key()
        width = self.scrollable_content_region.width
        nodes = list(self._node_views.values())
        groups = map_groups(nodes, self._order)
        # the picture depends on the groups' cells (names and states) and the room
        look = (width, self._map_lines(),
                tuple((g.pool, g.group, g.cells) for g in groups))
        if look != self._drawn_for:
            self._drawn_for = look
            self._picture = draw_map(groups, width, self._map_lines())
            self._index = {name: i for i, (name, _, _) in enumerate(self._picture.cells)}
            self._line_cells = {}
            for i, (_, line, x) in enumerate(self._picture.cells):
                self._line_cells.setdefault(line, []).append((x, i))
            self.virtual_size = Size(width, len(self._picture.lines) + 1)
            if keep is not None and keep in self._index:
                self._move(self._index[keep])
            elif self.cursor >= len(self._picture.cells):
                self._move(max(len(self._picture.cells) - 1, 0))
            self.refresh()
        else:
            # the map is as it was: only the detail line (the cursor node's verdicts) may differ
            self.refresh(Region(0, 0, self.size.width, 1))

    def on_resize(self, event: events.Resize) -> None:
        self._redraw()

    # -- cursor -----------------------------------------------------------------------

    def _move(self, index: int) -> None:
        if self._picture.cells:
            self.cursor = max(0, min(index, len(self._picture.cells) - 1))

    def watch_cursor(self, old: int, new: int) -> None:
        if 0 <= new < len(self._picture.cells):
            line = self._picture.cells[new][1]
            top, visible = round(self.scroll_offset.y), self._map_lines()
            if line < top:
                self.scroll_to(y=line, animate=False)
            elif line >= top + visible:
                self.scroll_to(y=line - visible + 1, animate=False)
        self.refresh()

    def _vertical(self, step: int) -> None:
        cells = self._picture.cells
        if not cells:
            return
        _, line, x = cells[self.cursor]
        lines = sorted(self._line_cells)
        at = bisect_left(lines, line) + step
        if 0 <= at < len(lines):
            row = self._line_cells[lines[at]]
            self._move(min(row, key=lambda cell: abs(cell[0] - x))[1])

    def action_cursor_left(self) -> None:
        self._move(self.cursor - 1)

    def action_cursor_right(self) -> None:
        self._move(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self._vertical(-1)

    def action_cursor_down(self) -> None:
        self._vertical(1)

    def _page(self, step: int) -> None:
        for _ in range(self._map_lines()):
            self._vertical(step)

    def action_page_up(self) -> None:
        self._page(-1)

    def action_page_down(self) -> None:
        self._page(1)

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self._picture.cells) - 1)

    def action_select_cursor(self) -> None:
        key = self.current_key()
        if key is not None:
            self.post_message(self.NodeChosen(self, key))

    async def _on_click(self, event: events.Click) -> None:
        line = round(self.scroll_offset.y) + event.y - 1
        for x, i in self._line_cells.get(line, []):
            if x == event.x:
                if i == self.cursor:
                    self.action_select_cursor()
                else:
                    self._move(i)
                return

    def _on_focus(self, event: events.Focus) -> None:
        self.refresh()

    def _on_blur(self, event: events.Blur) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        self._strips.clear()  # a theme change restyles every line
        self._styles.clear()
        super().notify_style_update()

    # -- drawing ----------------------------------------------------------------------

    def detail_text(self) -> Text:
        """The node under the cursor, then the legend: glyphs and what they mean."""
        out = Text(no_wrap=True, overflow="ellipsis")
        key = self.current_key()
        node = self._node_views.get(key) if key is not None else None
        if node is None:
            out.append("no node matches the filter" if not self._node_views else "", "grey50")
        else:
            state = node_map_state(node)
            out.append(inert(node.name, max_len=64))
            if node.group:
                out.append(f"  {inert(node.group, max_len=40).plain}", "grey70")
            out.append(f"  {state}", STATE_STYLE[state])
            kinds = [inert(v.kind, max_len=24).plain for v in node.verdicts
                     if not v.pending and v.kind != state]
            if kinds:
                out.append(": " + ", ".join(kinds), STATE_STYLE[state])
        shown = len(self._node_views)
        out.append(f"  │ {shown} node{'s' if shown != 1 else ''}", "grey70")
        if self._picture.folded:
            out.append(" (healthy folded into counts)", "grey70")
        out.append("  ")
        for text, style in legend():
            out.append(f" {text}", style)
        return out

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = Style.parse(name) if name else Style.null()
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("fleet-map--detail")
            segments = list(self.detail_text().render(self.app.console))
            return Strip(Segment.apply_style(segments, style), None).crop_extend(0, width, style)
        line = round(self.scroll_offset.y) + y - 1
        if not 0 <= line < len(self._picture.lines):
            return Strip.blank(width, base)
        cursor_x: int | None = None
        if self._picture.cells and 0 <= self.cursor < len(self._picture.cells):
            _, cursor_line, x = self._picture.cells[self.cursor]
            cursor_x = x if cursor_line == line else None
        atoms = self._picture.lines[line]
        cursor_class = "fleet-map--cursor" if self.has_focus else "fleet-map--cursor-blurred"
        key = (atoms, cursor_x, cursor_class if cursor_x is not None else None, width, base)
        hit = self._strips.get(key)
        if hit is not None:
            return hit
        strip = self._strip(atoms, cursor_x, cursor_class, width, base)
        self._strips.set(key, strip)
        self.lines_rendered += 1
        return strip

    def _strip(self, atoms: Sequence[Atom], cursor_x: int | None, cursor_class: str,
               width: int, base: Style) -> Strip:
        segments: list[Segment] = []
        at = 0
        run_text, run_style = "", base
        for x, text, style_name, _ in atoms:
            style = base + self._style(style_name)
            if x == cursor_x:
                style = style + self.get_component_rich_style(cursor_class)
            gap = " " * (x - at)
            if gap:
                if run_style is not base:
                    segments.append(Segment(run_text, run_style))
                    run_text, run_style = "", base
                run_text += gap
            if style == run_style:
                run_text += text
            else:
                if run_text:
                    segments.append(Segment(run_text, run_style))
                run_text, run_style = text, style
            at = x + len(text)
        if run_text:
            segments.append(Segment(run_text, run_style))
        return Strip(segments, at).crop_extend(0, width, base)
