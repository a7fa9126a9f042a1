"""TextLines (tui/text_lines.py): drawn as Static(Group(*lines)) draws them, line by line."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static

from infertop.tui.text_lines import TextLines

WIDTH = 30


class _App(App[None]):
    CSS = "Vertical { height: auto; width: 30; } Static, TextLines { height: auto; color: $text-muted; }"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="static")
            yield TextLines(id="lines")


def painted(widget: Widget) -> list[tuple[str, list[object]]]:
    """The widget's rows as its styles cache hands them to the screen: text and styles."""
    strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return [(strip.text, [segment.style for segment in strip]) for strip in strips]


def sample_lines(figure: str) -> list[Text]:
    return [
        Text.assemble(("spend ", "grey70"), (figure, "bold"), "  at $12.00/h"),
        Text("a note long enough to wrap over two rows of a thirty-cell panel", style="yellow"),
        Text.assemble(("tok/s ", "grey70"), ("▁▂▃▄▅▆▇█", "blue"), " 1,234"),
        Text("record off", style="grey50"),
    ]


async def test_lines_are_drawn_as_a_static_group_draws_them() -> None:
    app = _App()
    async with app.run_test(size=(40, 20)) as pilot:
        static, lines = app.query_one(Static), app.query_one(TextLines)
        for figure in ("$1.00", "$1,234.56"):
            static.update(Group(*sample_lines(figure)))
            lines.update(sample_lines(figure))
            await pilot.pause()
            assert lines.size == static.size and lines.size.height == 6  # the note wraps over three rows
            assert painted(lines) == painted(static)


async def test_a_changed_line_is_repainted_an_unchanged_one_comes_from_the_cache() -> None:
    app = _App()
    async with app.run_test(size=(40, 20)) as pilot:
        lines = app.query_one(TextLines)
        lines.update(sample_lines("$1.00"))
        await pilot.pause()
        assert painted(lines)[0][0].startswith("spend $1.00")
        rendered = lines.lines_rendered
        lines.update(sample_lines("$2.00"))
        await pilot.pause()
        assert painted(lines)[0][0].startswith("spend $2.00")
        assert lines.lines_rendered == rendered + 1  # only the line that changed
        # only a colour changes: the line is drawn anew in it
        grey = painted(lines)[5]
        changed = sample_lines("$2.00")
        changed[3] = Text("record off", style="red")
        lines.update(changed)
        await pilot.pause()
        red = painted(lines)[5]
        assert red[0] == grey[0] and red[1] != grey[1]


async def test_the_height_follows_the_rows_the_lines_take() -> None:
    app = _App()
    async with app.run_test(size=(40, 20)) as pilot:
        lines = app.query_one(TextLines)
        lines.update([Text("one")])
        await pilot.pause()
        assert lines.size.height == 1 == lines.row_count
        lines.update(sample_lines("$1.00"))
        await pilot.pause()
        assert lines.size.height == 6 == lines.row_count
