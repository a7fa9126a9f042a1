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
