"""RowTable (tui/row_table.py): keys, clicks and messages, through Textual's Pilot."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region

from infertop.tui.row_table import RowTable, fit_cell
from tests.support.tui_helpers import screen_text


class _App(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.selected: list[str] = []
        self.highlighted: list[str] = []

    def compose(self) -> ComposeResult:
        yield RowTable([("name", "NAME", None), ("n", "N", 4)], id="t")

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        self.selected.append(event.key)

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        self.highlighted.append(event.key)


async def test_click_moves_the_cursor_and_a_second_click_selects() -> None:
    app = _App()
    async with app.run_test(size=(30, 8)) as pilot:
        table = app.query_one(RowTable)
        table.sync([(k, [Text(k), Text("1", justify="right")]) for k in ("a", "b", "c")])
        table.focus()
        await pilot.pause()
        await pilot.click(RowTable, offset=(1, 2))  # line 0 is the header; line 2 is "b"
        await pilot.pause()
        assert table.current_key() == "b" and app.selected == []
        assert app.highlighted[-1] == "b"
        await pilot.click(RowTable, offset=(1, 2))
        await pilot.pause()
        assert app.selected == ["b"]
        await pilot.click(RowTable, offset=(1, 0))  # the header selects nothing
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.selected == ["b", "c"]


async def test_sync_and_order_keep_the_cursor_on_its_row() -> None:
    app = _App()
    async with app.run_test(size=(30, 8)) as pilot:
        table = app.query_one(RowTable)
        table.sync([(k, [Text(k), Text("1")]) for k in ("a", "b", "c")])
        table.move_cursor(row=1)
        table.set_order(["c", "b", "a"])
        await pilot.pause()
        assert table.displayed_order() == ["c", "b", "a"] and table.current_key() == "b"
        table.sync([(k, [Text(k), Text("2")]) for k in ("b", "d")])  # a and c leave
        assert table.displayed_order() == ["b", "d"] and table.current_key() == "b"
        table.sync([("x", [Text("x"), Text("1")]), ("x", [Text("x"), Text("2")])])
        assert table.displayed_order() == ["x", "x#2"]  # duplicate keys never crash


def test_cells_fit_their_column_whatever_their_length() -> None:
    assert fit_cell(Text("abc", justify="right"), 5).plain == "  abc"
    assert fit_cell(Text("abc"), 5).plain == "abc  "
    assert fit_cell(Text("abcdefgh"), 5).plain == "abcd…"
    assert fit_cell(Text("ab", justify="center"), 6).plain == "  ab  "


class _WideApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.clicked: list[str] = []

    def compose(self) -> ComposeResult:
        yield RowTable([("name", "NAME", None, 100), ("a", "AAAA", 6, 50), ("b", "BBBB", 6, 10),
                        ("c", "CCCC", 6, 40)], frozen=1, fit_to_width=True, id="t")

    def on_row_table_header_clicked(self, event: RowTable.HeaderClicked) -> None:
        self.clicked.append(event.column)


async def test_fit_drops_low_priority_columns_whole_and_numbers_widen() -> None:
    app = _WideApp()
    async with app.run_test(size=(24, 6)) as pilot:
        table = app.query_one(RowTable)
        table.sync([("n1", [Text("n1"), Text("1", justify="right"), Text("2", justify="right"),
                            Text("1234567890", justify="right")])])
        await pilot.pause()
        # NAME(4) + AAAA(6) + CCCC widened to its 10-digit number: 22 of 24; BBBB left out
        assert table.visible_columns == ["name", "a", "c"]
        line = table.render_line(1).text
        assert "1234567890" in line and "…" not in line
        await pilot.click(RowTable, offset=(6, 0))
        await pilot.pause()
        assert app.clicked == ["a"]


async def test_frozen_column_stays_while_the_rest_scroll() -> None:
    app = _WideApp()
    async with app.run_test(size=(16, 6)) as pilot:
        table = app.query_one(RowTable)
        table.set_fit_to_width(False)
        table.sync([("row-1", [Text("row-1"), Text("a1"), Text("b1"), Text("c1")])])
        await pilot.pause()
        table.scroll_to(x=7, animate=False)
        await pilot.pause()
        header, row = table.render_line(0).text, table.render_line(1).text
        assert header.startswith("NAME  BBBB") and row.startswith("row-1 b1")
        await pilot.click(RowTable, offset=(7, 0))  # the header of a scrolled column
        await pilot.pause()
        assert app.clicked == ["b"]


def _screen_line(app: App[None], y: int) -> str:
    """What the table paints on its line `y`: through its styles cache, as the screen asks
    for it, so a line kept from an earlier paint would show here."""
    table = app.query_one(RowTable)
    return table.render_lines(Region(0, y, table.size.width, 1))[0].text


async def test_a_changed_row_is_repainted_an_unchanged_one_is_not() -> None:
    app = _App()
    async with app.run_test(size=(30, 8)) as pilot:
        table = app.query_one(RowTable)
        table.sync([("a", [Text("a"), Text("1", justify="right")]),
                    ("b", [Text("b"), Text("2", justify="right")])])
        await pilot.pause()
        assert _screen_line(app, 1).startswith("a       1") and _screen_line(app, 2).startswith("b       2")
        rendered = table.lines_rendered
        # the same figures again: nothing is rendered through Rich
        table.sync([("a", [Text("a"), Text("1", justify="right")]),
                    ("b", [Text("b"), Text("2", justify="right")])])
        table.refresh()
        await pilot.pause()
        assert table.lines_rendered == rendered
        # one figure changes (same width, same style): its row is drawn anew, the other is not
        table.sync([("a", [Text("a"), Text("1", justify="right")]),
                    ("b", [Text("b"), Text("3", justify="right")])])
        await pilot.pause()
        assert _screen_line(app, 1).startswith("a       1") and _screen_line(app, 2).startswith("b       3")
        assert table.lines_rendered == rendered + 1
        # only the style changes (a figure turning red): the new colour is shown
        table.sync([("a", [Text("a"), Text("1", justify="right")]),
                    ("b", [Text("b"), Text("3", style="red", justify="right")])])
        await pilot.pause()
        cell = table.render_line(2).crop(8, 9)
        assert cell.text == "3"
        assert any(s.style is not None and s.style.color is not None and s.style.color.name == "red"
                   for s in cell)
        # and back: a cell seen before is drawn from the cache, with its old colour
        table.sync([("a", [Text("a"), Text("1", justify="right")]),
                    ("b", [Text("b"), Text("3", justify="right")])])
        await pilot.pause()
        cell = table.render_line(2).crop(8, 9)
        assert not any(s.style is not None and s.style.color is not None and s.style.color.name == "red"
                       for s in cell)


async def test_the_cursor_row_and_the_row_it_left_are_repainted() -> None:
    app = _App()
    async with app.run_test(size=(30, 8)) as pilot:
        table = app.query_one(RowTable)
        # two rows with cells alike: a cell cached under one row's style is not reused
        # under the other's
        table.sync([(k, [Text("x"), Text("1", justify="right")]) for k in ("a", "b")])
        table.focus()
        await pilot.pause()
        cursor = table.get_component_rich_style("row-table--cursor").bgcolor
        assert cursor is not None

        def backgrounds(y: int) -> set[object]:
            return {s.style.bgcolor for s in table.render_line(y) if s.style is not None}

        assert backgrounds(1) == {cursor} and cursor not in backgrounds(2)
        await pilot.press("down")
        await pilot.pause()
        assert cursor not in backgrounds(1) and backgrounds(2) == {cursor}


class _FlexApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RowTable([("name", "NAME", None, 100), ("usd", "$/H", 5, 90, "right"),
                        ("since", "FOR", 3, 20, "right"), ("note", "NOTE", None, 10)],
                       fit_to_width=True, flex="note", id="t")


async def test_a_narrow_table_shortens_figures_drops_columns_whole_and_cuts_text_with_an_ellipsis() -> None:
    from infertop.monitor.format import figure_forms
    from infertop.tui.row_table import FigureText

    app = _FlexApp()
    async with app.run_test(size=(40, 6)) as pilot:
        table = app.query_one(RowTable)
        table.sync([("a", [Text("decode-03"), FigureText(figure_forms(84.66, 2, money=True)),
                           Text("5s", justify="right"), Text("mlx5_1 down; mlx5_2 down; traffic piled")])])
        await pilot.pause()
        line = screen_text(app).splitlines()[1]
        # "$84.66" does not fit the column of 5: written "$84.7", never "$8"
        assert "$84.7" in line and "$84.66" not in line
        assert line.rstrip().endswith("…") and "mlx5_1 down" in line  # the note takes what is left
        assert table.hidden_columns == []
        await pilot.resize_terminal(22, 6)
        await pilot.pause()
        # no room for the note (less than its least): gone whole, and said
        assert table.hidden_columns == ["NOTE"]
        assert "…" not in screen_text(app)
        await pilot.resize_terminal(18, 6)
        await pilot.pause()
        assert table.hidden_columns == ["FOR", "NOTE"]
        assert "$84.7" in screen_text(app)
