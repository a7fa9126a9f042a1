"""Terminal bytes (issue 47 item 11): a frame repaints the cells that changed, not the
whole widget. `line_diff.changed_end` by table; RowTable and TextLines through Pilot, the
regions they ask Textual to repaint recorded through the public `Widget.refresh`."""

from __future__ import annotations

import pytest
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

from infertop.tui.line_diff import changed_end, join_runs
from infertop.tui.row_table import RowTable
from infertop.tui.text_lines import TextLines

RED = Style(color="red")
BG = Style(bgcolor="blue")
BOLD_BG = Style(bold=True, bgcolor="blue")
RED_BG = Style(color="red", bgcolor="blue")


def strip(*parts: tuple[str, Style | None]) -> Strip:
    return Strip([Segment(text, style) for text, style in parts])


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, strip(("abc", None)), 10),  # nothing drawn yet: the whole line
        (strip(("abc", None)), strip(("abc", None)), 0),  # the same look
        (strip(("abc   9", None)), strip(("abc   8", None)), 7),  # up to the last change
        (strip(("1bc   9", None)), strip(("2bc   9", None)), 1),  # a change at the left only
        (strip(("ab", None), ("c", RED)), strip(("abc", None)), 3),  # the colour is a change
        (strip(("ab", None), ("c", RED)), strip(("a", None), ("b", None), ("c", RED)), 0),  # split, same look
        (strip(("abcdef", None)), strip(("abc", None)), 6),  # shorter: the old tail is cleared
        (strip(("日本", None)), strip(("日x ", None)), 4),  # wide characters count two cells
        (strip(("abcdefghijkl", None)), strip(("abcdefghijkX", None)), 0),  # past the width: not drawn
    ],
)
def test_changed_end(old: Strip | None, new: Strip, expected: int) -> None:
    assert changed_end(old, new, 10) == expected


def seg(text: str, style: Style | None) -> Segment:
    return Segment(text, style)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([seg("ab", BG), seg("c", BG)], [seg("abc", BG)]),  # one style: one segment
        # spaces look the same bold or not, in any colour: they join the figure beside them
        ([seg("12", BOLD_BG), seg("   ", BG), seg("34", BOLD_BG)], [seg("12   34", BOLD_BG)]),
        ([seg(" ", BG), seg("infertop", BOLD_BG)], [seg(" infertop", BOLD_BG)]),
        ([seg("ok", RED_BG), seg("  ", BG), seg("x", BG)], [seg("ok  ", RED_BG), seg("x", BG)]),
        # what a space shows stays: another background, an underline, reversed colours
        ([seg("12", BOLD_BG), seg("  ", Style(bgcolor="red"))], [seg("12", BOLD_BG), seg("  ", Style(bgcolor="red"))]),
        ([seg("12", BG), seg("  ", Style(underline=True, bgcolor="blue"))],
         [seg("12", BG), seg("  ", Style(underline=True, bgcolor="blue"))]),
        ([seg("12", BG), seg("  ", Style(reverse=True, bgcolor="blue"))],
         [seg("12", BG), seg("  ", Style(reverse=True, bgcolor="blue"))]),
        # letters keep their own look
        ([seg("ab", BOLD_BG), seg("cd", BG)], [seg("ab", BOLD_BG), seg("cd", BG)]),
    ],
)
def test_join_runs(parts: list[Segment], expected: list[Segment]) -> None:
    joined = join_runs(parts)
    assert joined == expected
    # drawn the same: each cell's character and, for a letter, its whole style
    def cells(segments: list[Segment]) -> list[tuple[str, object]]:
        return [(ch, s.style if ch != " " else (s.style.bgcolor if s.style else None))
                for s in segments for ch in s.text]
    assert cells(joined) == cells(parts)


class Recording(RowTable):
    """A RowTable whose repaint requests are kept (Widget.refresh is public API)."""

    asked: list[tuple[Region, ...]]

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Recording:
        self.asked.append(regions)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        table = Recording([("name", "NAME", None), ("util", "UTIL", 5), ("role", "ROLE", 8)], id="t")
        table.asked = []
        yield table


def rows(utils: list[int]) -> list[tuple[str, list[Text]]]:
    return [(f"n{i}", [Text(f"n{i}"), Text(f"{u}%", justify="right"), Text("decode")])
            for i, u in enumerate(utils)]


async def test_a_changed_cell_repaints_its_line_up_to_that_cell() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 8)) as pilot:
        table = app.query_one(Recording)
        table.sync(rows([10, 20, 30]))
        await pilot.pause()
        table.asked.clear()
        table.sync(rows([10, 25, 30]))  # one figure of one row
        await pilot.pause()
        # line 2 (header, then row 1), up to the changed digit: "n1  20%" → "n1  25%"
        assert table.asked == [(Region(0, 2, 9, 1),)]
        table.asked.clear()
        table.sync(rows([10, 25, 30]))  # nothing changed: nothing repainted
        await pilot.pause()
        assert table.asked == []
        table.sync(rows([10, 25, 30, 40]))  # a row came: the table is drawn again
        await pilot.pause()
        assert () in table.asked


class LinesApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TextLines([Text("spend $1.00"), Text("phase run")], id="lines")


async def test_text_lines_repaint_only_the_lines_that_changed() -> None:
    app = LinesApp()
    async with app.run_test(size=(40, 6)) as pilot:
        lines = app.query_one(TextLines)
        await pilot.pause()
        asked: list[tuple[Region, ...]] = []
        original = lines.refresh

        def recording(*regions: Region, **kwargs: bool) -> TextLines:
            asked.append(regions)
            return original(*regions, **kwargs)

        lines.refresh = recording  # type: ignore[method-assign]
        lines.update([Text("spend $1.01"), Text("phase run")])
        assert asked == [(Region(0, 0, 11, 1),)]
        asked.clear()
        lines.update([Text("spend $1.01"), Text("phase run"), Text("a third line")])
        assert asked == [()]  # another height: laid out and drawn again
