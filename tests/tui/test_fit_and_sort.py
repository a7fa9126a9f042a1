"""The overview fits any terminal and sorts the way people hunt (issue 18: Fit, Sort).

Frames come from the real Monitor at fixed instants (`FrozenFeed`) for 16 nodes, drawn
at 80x24, 120x40, 160x45 and 220x60 through Textual's Pilot, with an SVG snapshot of
each size. Plug-in panels are left out of the pictures so that their own changes do not
churn them (they have their own tests).
Update after an intended change: `pytest tests/tui/test_fit_and_sort.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from infertop.monitor.snapshot import NodeView, Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.columns import COLUMN_KEYS, render_row
from infertop.tui.node_table import NodeTable
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for

SIZES = [(80, 24), (120, 40), (160, 45), (220, 60)]


def sixteen_nodes() -> FrozenFeed:
    specs = [NodeSpec(f"prefill-{i:02d}", role="prefill", steps_per_s=None, util_pct=60.0 + i)
             for i in range(1, 5)]
    specs += [
        NodeSpec(f"decode-{i:02d}", gpus=8, util_pct=3.0 if i == 5 else 80.0 + i,
                 steps_per_s=8.0 if i == 7 else 300_000.0 + i,  # big numbers, wider than the columns
                 down_nics=("mlx5_1",) if i == 3 else ())
        for i in range(1, 13)
    ]
    return FrozenFeed(specs, ticks=5)


async def settled(pilot, app: InfertopApp, feed: FrozenFeed) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
    await pilot.pause()


def table_lines(app: InfertopApp) -> tuple[str, list[str]]:
    """The node table's header line and its row lines, as the terminal shows them."""
    table = app.overview.table
    top = table.region.y
    lines = screen_text(app).splitlines()[top: top + table.region.height]
    return lines[0], lines[1:]


def assert_whole_numbers(app: InfertopApp, feed: FrozenFeed) -> None:
    """Every shown cell of every row on screen is there in full (no cut numbers), and every
    shown column's label is whole in the header."""
    table = app.overview.table
    header, rows = table_lines(app)
    nodes = {n.name: n for n in feed.frames[-1].nodes}
    for key in table.visible_columns:
        label = next(c.label for c in table.columns if c.key == key)
        assert label in header, (key, header)
    for line in rows:
        name = line.split(" ", 1)[0]
        if name not in nodes:
            continue
        cells = dict(zip(COLUMN_KEYS, render_row(nodes[name]), strict=True))
        for key in table.visible_columns:
            if cells[key].justify == "right":
                # a figure may be written shorter (the one rule's forms), never cut
                forms = getattr(cells[key], "forms", (cells[key].plain,))
                assert any(f" {form}" in f" {line}" for form in forms), (name, key, forms, line)
    assert "…" not in "".join(rows)
    assert table._table_width() <= table.scrollable_content_region.width


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_overview_fits_the_terminal(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])

    async def check(pilot) -> None:  # type: ignore[no-untyped-def]
        await settled(pilot, app, feed)
        assert_whole_numbers(app, feed)
        header, _ = table_lines(app)
        assert header.startswith("NODE")
        visible = app.overview.table.visible_columns
        # the hunt's columns come first and stay longest
        assert visible[:4] == ["name", "status", "verdicts", "cost"]
        if size[0] >= 160:
            assert {"cost", "idle", "tokens", "util", "steps"} <= set(visible)
        if size[0] >= 220:
            assert visible == list(COLUMN_KEYS)  # room for every column
        text = screen_text(app)
        # the header never loses the essentials, however narrow: it folds instead
        for essential in ("spend $", "/h", "idle $", "phase run", "nodes 16"):
            assert essential in text, essential

    assert snap_compare(app, terminal_size=size, run_before=check)


async def test_node_column_stays_when_scrolled_right() -> None:
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, app, feed)
        table = app.overview.table
        assert "mem" not in table.visible_columns  # 120 columns: GPU MEM is left out
        assert not table.check_action("scroll_right", ())  # nothing to scroll: not offered
        await pilot.press("w")  # every column, scrolled sideways
        await pilot.pause()
        assert table.visible_columns == list(COLUMN_KEYS)
        for _ in range(60):
            await pilot.press("right")
        await pilot.pause()
        assert table.scroll_offset.x > 0
        header, rows = table_lines(app)
        assert header.startswith("NODE") and "NET TX" in header and "VERDICTS" not in header
        names = [line.split(" ", 1)[0] for line in rows if line.strip()]
        assert names[:3] == ["prefill-01", "prefill-02", "prefill-03"]
        await pilot.press("w")  # back to the columns that fit
        await pilot.pause()
        assert "mem" not in table.visible_columns


def header_x(app: InfertopApp, label: str) -> int:
    header, _ = table_lines(app)
    return header.index(label) - app.overview.table.region.x


async def test_header_click_sorts_worst_first_then_reverses_with_an_arrow() -> None:
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        table = app.overview.table
        await pilot.click(NodeTable, offset=(header_x(app, "UTIL"), 0))
        await pilot.pause()
        assert app.overview.sort.column == "util"
        assert table.displayed_order()[0] == "decode-05"  # the idle node first
        header, _ = table_lines(app)
        assert "UTIL▲" in header and "sort util" in screen_text(app)
        await pilot.click(NodeTable, offset=(header_x(app, "UTIL▲"), 0))
        await pilot.pause()
        assert app.overview.sort.reverse and "UTIL▼" in table_lines(app)[0]
        assert table.displayed_order()[-1] == "decode-05"
        await pilot.press("r")  # back to worst first
        await pilot.pause()
        assert not app.overview.sort.reverse and table.displayed_order()[0] == "decode-05"
        await pilot.click(NodeTable, offset=(header_x(app, "$/H"), 0))
        await pilot.pause()
        assert "$/H▼" in table_lines(app)[0]  # the most expensive first
        assert table.displayed_order()[:12] == [f"decode-{i:02d}" for i in range(1, 13)]
        await pilot.press("s")  # severity, then $ at stake
        await pilot.pause()
        assert app.overview.sort.column == "verdicts" and "VERDICTS▲" in table_lines(app)[0]


def jitter(frame: Snapshot, utils: dict[str, float]) -> Snapshot:
    def moved(node: NodeView) -> NodeView:
        if node.name not in utils:
            return node
        gpus = [g.model_copy(update={"util_pct": utils[node.name]}) for g in node.gpus]
        return node.model_copy(update={"gpu_util_pct": utils[node.name], "gpus": gpus})

    return frame.model_copy(update={"nodes": [moved(n) for n in frame.nodes]})


async def test_rows_reorder_only_beyond_the_margin() -> None:
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        await pilot.click(NodeTable, offset=(header_x(app, "UTIL"), 0))
        await pilot.pause()
        table = app.overview.table
        base = feed.frames[-1]
        app.render_snapshot(jitter(base, {"decode-01": 50.0, "decode-02": 51.0}))
        first = table.displayed_order()
        assert first[:3] == ["decode-05", "decode-01", "decode-02"]
        for a, b in [(51.5, 50.0), (50.2, 51.4), (51.9, 50.1)]:  # within 5 %: no reshuffle
            app.render_snapshot(jitter(base, {"decode-01": a, "decode-02": b}))
            assert table.displayed_order() == first
        app.render_snapshot(jitter(base, {"decode-01": 70.0, "decode-02": 40.0}))  # a real change
        assert table.displayed_order()[:3] == ["decode-05", "decode-02", "prefill-01"]




def test_header_folds_between_items_never_inside_one() -> None:
    from rich.text import Text

    from infertop.tui.header import wrap_items

    text = Text("infertop ▸ c   session 1:00:04   spend $260.29   $260.00/h   idle $0.02   phase run")
    folded = wrap_items(text, 40).plain.splitlines()
    assert folded == ["infertop ▸ c   session 1:00:04", "spend $260.29   $260.00/h   idle $0.02",
                      "phase run"]
    assert wrap_items(text, 200).plain == text.plain  # wide enough: one line, unchanged


def test_a_long_item_of_wide_characters_folds_by_cells() -> None:
    from rich.text import Text

    from infertop.tui.header import wrap_items

    # a cluster named in CJK (two cells a character) longer than the line
    name = "推理集群" * 6 + " 第二机房 " + "决" * 30
    folded = wrap_items(Text(f"infertop ▸ {name}   phase run"), 40).plain.splitlines()
    assert all(Text(line).cell_len <= 40 for line in folded), folded
    assert "".join(folded).replace(" ", "") == f"infertop▸{name}phaserun".replace(" ", "")


async def test_a_new_sort_shows_its_top_whatever_row_the_cursor_was_on() -> None:
    # a newcomer's trial: sorted by verdicts with the cursor low in the table, the rows
    # above it (the critical one first) were scrolled out of sight
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])
    # 16 lines: at 80x24 the roll-ups fold and all 16 rows fit, nothing scrolls
    async with app.run_test(size=(80, 16)) as pilot:
        await settled(pilot, app, feed)
        table = app.overview.table
        await pilot.press("end")
        await pilot.pause()
        assert table.current_key() == "decode-12" and round(table.scroll_offset.y) > 0
        await pilot.click(NodeTable, offset=(header_x(app, "UTIL"), 0))  # lowest first
        await pilot.pause()
        _, rows = table_lines(app)
        assert table.current_key() == table.displayed_order()[0] == "decode-05"  # the idle one
        assert rows[0].startswith("decode-05")
        await pilot.press("end", "greater_than_sign")  # the next column, by key
        await pilot.pause()
        assert app.overview.sort.column != "util" and round(table.scroll_offset.y) == 0
        assert table.current_key() == table.displayed_order()[0]


async def test_reverse_is_offered_only_when_sorted() -> None:
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        assert "Reverse" not in screen_text(app).splitlines()[-1]  # the layout's order
        await pilot.press("r")  # does nothing, offers nothing
        assert app.overview.sort.column is None
        await pilot.press("greater_than_sign")
        await pilot.pause()
        assert "Reverse" in screen_text(app).splitlines()[-1]


async def test_a_renamed_node_widens_the_name_column() -> None:
    # the name cells' widths are kept from frame to frame: a new name is measured anew
    feed = sixteen_nodes()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(220, 60)) as pilot:
        await settled(pilot, app, feed)
        frame = feed.frames[-1]
        long_name = "decode-01-in-the-second-row-of-racks"
        nodes = [n.model_copy(update={"name": long_name}) if n.name == "decode-01" else n
                 for n in frame.nodes]
        renamed = frame.model_copy(update={"nodes": nodes})
        app.publish(renamed)
        await wait_for(pilot, lambda: app.overview.snapshot is renamed)
        await pilot.pause()
        _, rows = table_lines(app)
        assert any(row.startswith(long_name + " ") for row in rows)
        assert all(row[len(long_name)] == " " for row in rows if row.strip())
