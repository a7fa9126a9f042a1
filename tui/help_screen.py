"""`?`: every key binding of the app and its screens, built from their BINDINGS so it
can never fall out of date."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from infertop.tui.fleet_map_picture import legend
from infertop.tui.sections import SCROLL_BINDINGS, SectionKeys

KEY_NAMES = {
    "slash": "/",
    "question_mark": "?",
    "escape": "Esc",
    "enter": "Enter",
    "ctrl+p": "Ctrl+P",
    "greater_than_sign": ">",
    "less_than_sign": "<",
    "left": "←",
    "right": "→",
    "tab": "Tab",
    "shift+tab": "Shift+Tab",
    "up": "↑",
    "down": "↓",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "home": "Home",
    "end": "End",
}


def key_label(key: str) -> str:
    return ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in key.split(","))


def bindings_of(bindings: Iterable[BindingType]) -> list[Binding]:
    out = []
    for b in bindings:
        if isinstance(b, Binding):
            out.append(b)
        elif isinstance(b, tuple) and len(b) >= 2:
            out.append(Binding(b[0], b[1], b[2] if len(b) > 2 else ""))
    return out


def help_table(scopes: list[tuple[str, Iterable[BindingType]]], palette_key: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, header_style="bold grey70", expand=False)
    table.add_column("WHERE", no_wrap=True)
    table.add_column("KEY", no_wrap=True, style="bold cyan")
    table.add_column("WHAT")
    for scope, bindings in scopes:
        said: set[tuple[str, str]] = set()  # a family of keys said once (`1`–`9`: nine bindings)
        for b in bindings_of(bindings):
            row = (b.key_display or key_label(b.key), b.tooltip or b.description or b.action)
            if row not in said:
                said.add(row)
                table.add_row(scope, *row)
    table.add_row(
        "everywhere", key_label(palette_key), "Command palette (every action, open a node, mark a phase)"
    )
    return table


def map_legend() -> Text:
    """The fleet map's glyphs and what each means (the map's own legend, not a copy)."""
    out = Text("Fleet map (f): a cell per node, grouped by pool and the layout's group; ", "grey70")
    for text, style in legend():
        out.append(f" {text}", style)
    return out


class HelpScreen(SectionKeys, ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close help"),
        Binding("question_mark", "dismiss", "Close help"),
        *SCROLL_BINDINGS,
    ]

    def __init__(self, scopes: list[tuple[str, Iterable[BindingType]]], palette_key: str) -> None:
        super().__init__(id="help")
        self.scopes = scopes
        self.palette_key = palette_key
        self.scroll_body = VerticalScroll(id="help-box")

    def on_mount(self) -> None:
        self.scroll_body.focus()

    def compose(self) -> ComposeResult:
        with self.scroll_body:
            yield Static(Text("infertop — keys", "bold"))
            scopes = [*self.scopes, ("help", self.BINDINGS)]
            yield Static(help_table(scopes, self.palette_key), id="help-table")
            yield Static(
                Text(
                    "Filter: a substring of name, role, status or verdict; several words must all "
                    "match; a leading ! shows the nodes that do not match. Sort: click a column's "
                    "header (again to reverse); ▲/▼ in the header shows the sort.",
                    "grey70",
                )
            )
            yield Static(map_legend(), id="help-map-legend")
