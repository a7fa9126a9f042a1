"""Reading a long screen by keys alone: every screen taller than the terminal (the node
screen, the scoreboard, the evidence, the help) scrolls with PgUp/PgDn/Home/End and j/k,
and Tab / Shift+Tab jump from section to section (a section's table, if it has one,
takes the cursor; a text section gives the keys to the page itself, so ↑/↓ scroll it).

A screen mixes in `SectionKeys`, names its scrolling body (`scroll_body`) and lists its
sections in reading order (`sections()`), the hidden ones left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.widget import Widget


@dataclass(frozen=True)
class Section:
    title: str
    anchor: Widget  # scrolled to the top of the page
    table: Widget | None = None  # takes the cursor (its ↑/↓ move the cursor)


# the page's keys; a focused table's own ↑/↓/PgUp/PgDn/Home/End move its cursor first
SCROLL_BINDINGS: list[BindingType] = [
    Binding("pagedown", "scroll_page(1)", "Page down", show=False, tooltip="Scroll a page down"),
    Binding("pageup", "scroll_page(-1)", "Page up", show=False, tooltip="Scroll a page up"),
    Binding("home", "scroll_edge(0)", "Top", show=False, tooltip="To the top"),
    Binding("end", "scroll_edge(1)", "Bottom", show=False, tooltip="To the bottom"),
    Binding("j", "scroll_lines(1)", "Down", show=False, tooltip="Scroll a line down"),
    Binding("k", "scroll_lines(-1)", "Up", show=False, tooltip="Scroll a line up"),
]
SECTION_BINDINGS: list[BindingType] = [
    Binding("tab", "next_section", "Next section",
            tooltip="Jump to the next section (its table takes the cursor)"),
    Binding("shift+tab", "previous_section", "Previous section", show=False,
            tooltip="Jump to the previous section"),
    *SCROLL_BINDINGS,
]


class SectionKeys:
    """The actions behind `SECTION_BINDINGS` for a screen with a scrolling body."""

    scroll_body: ScrollableContainer
    _section_at: int = -1

    def sections(self) -> list[Section]:
        return []

    def action_next_section(self) -> None:
        self._jump(1)

    def action_previous_section(self) -> None:
        self._jump(-1)

    def _jump(self, step: int) -> None:
        shown = [s for s in self.sections() if s.anchor.display]
        if not shown:
            return
        self._section_at = (self._section_at + step) % len(shown)
        self.go_to_section(shown[self._section_at])

    def go_to_section(self, section: Section) -> None:
        body = self.scroll_body
        body.scroll_to(y=section.anchor.virtual_region.y, animate=False, immediate=True)
        target = section.table if section.table is not None and section.table.display else body
        target.focus(scroll_visible=False)

    def current_section(self) -> str | None:
        """The title of the section last jumped to (None before any jump)."""
        shown = [s for s in self.sections() if s.anchor.display]
        return shown[self._section_at].title if 0 <= self._section_at < len(shown) else None

    def action_scroll_page(self, pages: int) -> None:
        body = self.scroll_body
        body.scroll_to(y=body.scroll_y + pages * max(body.scrollable_content_region.height - 1, 1),
                       animate=False, immediate=True)

    def action_scroll_edge(self, end: int) -> None:
        body = self.scroll_body
        body.scroll_to(y=body.max_scroll_y if end else 0, animate=False, immediate=True)

    def action_scroll_lines(self, lines: int) -> None:
        body = self.scroll_body
        body.scroll_to(y=body.scroll_y + lines, animate=False, immediate=True)
