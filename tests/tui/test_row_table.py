"""RowTable (tui/row_table.py): keys, clicks and messages, through Textual's Pilot."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from tui.row_table import RowTable, fit_cell


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
