"""Every screen at every size an operator uses (issue 47): the demo's own frames (16 and
128 nodes, recorded by the real monitor: `tests.support.demo_frames`) drawn through Pilot
at 80x24, 100x30, 120x36, 160x45 and 200x60 — the overview, a flagged node, the
scoreboard, a verdict's evidence, the timeline and the help — and read back:

- no widget reaches past the screen's edge;
- every figure a table draws is the snapshot's own at the precision shown (parsed back:
  "$84.7" is 84.66 to a tenth, "5.4k" is 5,400 to a hundred), never a cut one ("$8");
- no text cell is cut without "…".

One app per demo and size opens every screen in turn (the sweep stays cheap).
"""

from __future__ import annotations

import re

import pytest
from textual.widget import Widget
from textual.widgets import Footer, Static

from infertop.monitor.evaluation.verdicts import hunt_order
from infertop.monitor.snapshot import NodeView, Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.columns import COLUMNS
from infertop.tui.evidence_screen import EvidenceScreen
from infertop.tui.header import HeaderBar
from infertop.tui.help_screen import HelpScreen
from infertop.tui.hunt_list import HuntList
from infertop.tui.node_screen import NodeScreen
from infertop.tui.row_table import FigureText, RowTable
from infertop.tui.scoreboard_screen import ScoreboardScreen
from infertop.tui.session_panel import SessionPanel
from infertop.tui.text_lines import TextLines
from infertop.tui.timeline_screen import TimelineScreen
from tests.support.demo_frames import DemoFramesFeed
from tests.support.tui_helpers import screen_text, wait_for

SIZES = [(80, 24), (100, 30), (120, 36), (160, 45), (200, 60)]
SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_FIGURE = re.compile(r"^-?\$?(?P<number>[\d,]+(?:\.\d+)?)(?P<prefix>[kMGT]?)")


def read_back(drawn: str) -> tuple[float, float]:
    """A drawn figure as (value, half a step of its last digit): the precision shown."""
    match = _FIGURE.match(drawn.strip())
    assert match, f"not a figure: {drawn!r}"
    number = match["number"].replace(",", "")
    scale = SI.get(match["prefix"], 1.0)
    decimals = len(number.partition(".")[2])
    return float(number) * scale, 0.5 * 10 ** -decimals * scale


def assert_within_screen(app: InfertopApp, size: tuple[int, int], where: str) -> None:
    width, _ = size
    for widget in app.screen.walk_children():
        if width < 120 and any(isinstance(a, Footer) for a in widget.ancestors):
            continue  # the footer scrolls sideways on a narrow terminal; from 120 it fits
        region = widget.region
        if widget.display and region.width and region.height:
            assert region.x >= 0 and region.right <= width, (where, widget, region)


def drawn_cells(app: InfertopApp, table: RowTable) -> list[tuple[str, dict[str, str]]]:
    """Each row on screen as the terminal shows it: (row key, column key → drawn text)."""
    if round(table.scroll_offset.x) or not table.region.height:
        return []  # scrolled sideways: the columns are not where `column_spans` says
    lines = screen_text(app).splitlines()
    top = round(table.scroll_offset.y)
    keys = table.shown_keys
    out = []
    for y in range(1, table.region.height):
        row = top + y - 1
        if row >= len(keys):
            break
        line = lines[table.region.y + y][table.region.x:table.region.right]
        out.append((keys[row], {key: line[x:x + w] for key, x, w in table.column_spans()}))
    return out


def assert_cells_true(app: InfertopApp, table: RowTable, figure_of: dict[str, object], where: str) -> None:
    """Figures equal the snapshot's at the precision drawn; text whole or cut with "…"."""
    for key, drawn in drawn_cells(app, table):
        for column, text in drawn.items():
            cell = table.get_cell(key, column)
            shown = text.strip()
            if isinstance(cell, FigureText):
                assert shown in cell.forms, (where, key, column, shown, cell.forms)
                value = figure_of.get(column)
                if callable(value):
                    value = value(key)
                if isinstance(value, int | float) and shown != "—":
                    got, half_step = read_back(shown)
                    assert abs(got - abs(value)) <= half_step * 1.0001, (where, key, column, shown, value)
            elif cell.justify != "right" and cell.plain.strip():
                whole = cell.plain.rstrip()
                assert shown == whole or (shown.endswith("…") and whole.startswith(shown[:-1])), (
                    where, key, column, shown, whole)


def node_figures(frame: Snapshot) -> dict[str, object]:
    nodes = {n.name: n for n in frame.nodes}

    def of(column_key: str) -> object:
        column = next(c for c in COLUMNS if c.key == column_key)
        assert column.value is not None
        read = column.value
        return lambda name: read(nodes[name])

    return {key: of(key) for key in ("cost", "steps", "tokens")}


def stake_figures(hunt: HuntList) -> dict[str, object]:
    def stake(row: str) -> float | None:
        if row in hunt.pairs:
            return hunt.pairs[row][1].usd_per_hour_at_stake
        group = hunt.groups.get(row)
        return None if group is None else group.usd_per_hour_at_stake

    return {"stake": stake}


def first_flagged(frame: Snapshot) -> NodeView:
    node, _ = hunt_order(frame.nodes)[0]
    return node


def assert_footer_reaches_the_edge(app: InfertopApp, size: tuple[int, int], where: str) -> None:
    """The footer's "^p palette" key, docked right, covers the screen's last column: with a
    right margin (Textual's compact footer) a letter of a key hidden under it showed there
    in the real terminal ("palettel")."""
    for footer in app.screen.query(Footer):
        palette = footer.query(".-command-palette")
        if palette and palette.first().display:
            assert palette.first().region.right == size[0], (where, palette.first().region)


async def check_screen(pilot, app: InfertopApp, size: tuple[int, int], where: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    assert_within_screen(app, size, where)
    assert_footer_reaches_the_edge(app, size, where)


@pytest.mark.parametrize("nodes", [16, 128])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_every_screen_fits_and_draws_the_snapshots_figures(nodes: int, size: tuple[int, int]) -> None:
    feed = DemoFramesFeed(nodes)
    frame = feed.frames[-1]
    app = InfertopApp(feed)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is frame)
        await check_screen(pilot, app, size, "overview")
        hunt = app.overview.query_one(HuntList)
        assert_cells_true(app, hunt, stake_figures(hunt), f"hunt list {size}")
        if app.overview.table.display:
            assert_cells_true(app, app.overview.table, node_figures(frame), f"node table {size}")
            # what a narrow table leaves out is said in the header, with the key that shows it
            hidden = app.overview.table.hidden_columns
            assert not hidden or f"{len(hidden)} column" in screen_text(app)
        # every flagged node with its verdict and $/h at stake, on the overview itself
        shown = {key for key, _ in drawn_cells(app, hunt)}
        assert len(shown) == hunt.row_count or hunt.row_count > hunt.region.height - 1, (size, shown)
        assert "stake" in hunt.visible_columns and "kind" in hunt.visible_columns

        app.open_node(first_flagged(frame).name)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.snapshot is frame)
        await check_screen(pilot, app, size, "node screen")
        await pilot.press("escape")

        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreboardScreen))
        await check_screen(pilot, app, size, "scoreboard")
        # the table of points is never squeezed to "1,…" (a label may end in "…")
        assert not re.search(r"\d[,.]?…", screen_text(app))
        await pilot.press("escape")

        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen))
        await check_screen(pilot, app, size, "timeline")
        await pilot.press("escape")

        straggler = next(((n, v) for n in frame.nodes for v in n.verdicts if v.evidence), None)
        if straggler is not None:
            app.push_screen(EvidenceScreen(*straggler))
            await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen))
            await check_screen(pilot, app, size, "evidence")
            await pilot.press("escape")

        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await check_screen(pilot, app, size, "help")


async def assert_fresh(pilot, app: InfertopApp, after: str) -> None:  # type: ignore[no-untyped-def]
    """The screen equals a fresh render of the same state: every table's cached lines
    thrown away and the whole screen laid out again (no stale or duplicated rows)."""
    await pilot.pause()
    shown = screen_text(app)
    for table in app.screen.query(RowTable):
        table.notify_style_update()  # drops its cached lines and cells
    app.screen.refresh(layout=True)
    await pilot.pause()
    assert screen_text(app) == shown, after


def in_view(widget, body) -> bool:  # type: ignore[no-untyped-def]
    return body.region.y <= widget.region.y < body.region.bottom


async def walk_sections(pilot, app: InfertopApp, where: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Tab through every section of the screen on top: each comes into view (its table,
    if it has one, takes the cursor); the titles in the order reached."""
    screen = app.screen
    shown = [s for s in screen.sections() if s.anchor.display]  # type: ignore[attr-defined]
    reached = []
    for _ in shown:
        await pilot.press("tab")
        await assert_fresh(pilot, app, f"{where}: tab")
        section = next(s for s in shown if s.title == screen.current_section())  # type: ignore[attr-defined]
        assert in_view(section.anchor, screen.scroll_body), (where, section.title)  # type: ignore[attr-defined]
        if section.table is not None:
            assert app.focused is section.table, (where, section.title)
        reached.append(section.title)
    body = screen.scroll_body  # type: ignore[attr-defined]
    for key, at in (("home", lambda: body.scroll_y == 0), ("end", lambda: body.scroll_y == body.max_scroll_y),
                    ("pageup", lambda: body.scroll_y < body.max_scroll_y or body.max_scroll_y == 0),
                    ("k", lambda: True), ("j", lambda: True), ("pagedown", lambda: True)):
        await pilot.press(key)
        await assert_fresh(pilot, app, f"{where}: {key}")
        assert at(), (where, key, body.scroll_y, body.max_scroll_y)
    return reached


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
async def test_every_section_is_reached_by_keys_alone(size: tuple[int, int]) -> None:
    feed = DemoFramesFeed(16)
    frame = feed.frames[-1]
    app = InfertopApp(feed)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is frame)
        # the hunt list's first verdict, by keys: Tab to the list, Enter opens its node
        await pilot.press("tab")
        assert isinstance(app.focused, HuntList)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.snapshot is frame)
        assert app.screen.node == first_flagged(frame).name  # type: ignore[attr-defined]
        node_sections = await walk_sections(pilot, app, f"node screen {size}")
        for needed in ("GPUS", "NETWORK", "ENGINE", "ENGINES", "ACTIVITY", "ENGINE SETTINGS", "TIMELINE"):
            assert needed in node_sections
        # ↑/↓ and → in a table move its cursor and columns, and the screen stays true
        await pilot.press("tab")  # back to the GPUs
        for key in ("down", "down", *["right"] * 10, "end"):
            await pilot.press(key)
            await assert_fresh(pilot, app, f"node screen {size}: {key}")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.overview)
        assert app.focused is app.overview.table  # not the hunt list the node was opened from

        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreboardScreen))
        board_sections = await walk_sections(pilot, app, f"scoreboard {size}")
        assert board_sections[0] == "CHART" and board_sections[-1] == "THROUGHPUT PER POOL AND NODE"

        await pilot.press("question_mark")  # opened from the scoreboard: its keys first
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_text = screen_text(app)
        assert help_text.index("scoreboard") < help_text.index("everywhere")
        assert "Jump to the next section" in help_text and "PgDn" in help_text


# -- the text blocks: header, session panel, node screen --------------------------------
TEXT_SIZES = [(80, 24), (120, 36), (160, 45)]
_SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


def block_text(widget) -> str:  # type: ignore[no-untyped-def]
    """The whole text a block holds (before the terminal's width cuts or wraps it)."""
    if isinstance(widget, TextLines):
        return "\n".join(line.plain for line in widget.lines)
    content = widget.render()
    return content.plain if hasattr(content, "plain") else str(content)


def assert_block_true(app: InfertopApp, widget, where: str) -> str:  # type: ignore[no-untyped-def]
    """Every row of `widget` on screen is a piece of its own text, or a piece cut with
    "…"; no figure in it is written in scientific notation. Its whole text, returned."""
    whole = block_text(widget)
    assert not _SCIENTIFIC.search(whole), (where, whole)
    flat = " ".join(whole.split())
    lines = screen_text(app).splitlines()
    clip = widget.region.intersection(app.screen.region)
    for parent in widget.ancestors:  # what a scrolling parent shows of it
        if isinstance(parent, Widget) and parent.is_scrollable and parent.region.area:
            clip = clip.intersection(parent.region)
    for y in range(clip.y, clip.bottom):
        drawn = " ".join(lines[y][clip.x:clip.right].split())
        if not drawn:
            continue
        if drawn.endswith("…"):
            assert drawn[:-1].rstrip() in flat, (where, y, drawn, whole)
            continue
        # whole words: a row that stops inside a word ("$84.6" of "$84.66/h") was cut
        assert re.search(r"(^|\s)" + re.escape(drawn) + r"(\s|$)", flat), (where, y, drawn, whole)
    return whole


def assert_figure(text: str, label: str, value: float | None, where: str) -> None:
    """The figure after `label` in `text` is `value` at the precision it is written with."""
    match = re.search(re.escape(label) + r"\s*(-?\$?[\d,]+(?:\.\d+)?[kMGT]?)", text)
    assert match is not None or value is None, (where, label, text)
    if match is None or value is None:
        return
    got, half_step = read_back(match[1])
    assert abs(got - abs(value)) <= half_step * 1.0001, (where, label, match[1], value)


@pytest.mark.parametrize("size", TEXT_SIZES, ids=[f"{w}x{h}" for w, h in TEXT_SIZES])
async def test_text_blocks_draw_the_snapshots_figures_whole(size: tuple[int, int]) -> None:
    """The header, the session panel and the node screen's text blocks: each row drawn is
    the block's own text or cut with "…", every figure the snapshot's own at the
    precision shown, never "e+" (issue 47: those blocks used their own formats)."""
    feed = DemoFramesFeed(16)
    frame = feed.frames[-1]
    session = frame.session
    app = InfertopApp(feed)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is frame)
        await pilot.pause()
        header = assert_block_true(app, app.screen.query_one(HeaderBar), f"header {size}")
        assert_figure(header, "spend", session.spend_usd, f"header {size}")
        panels = list(app.screen.query(SessionPanel))
        for panel in panels:
            if panel.display:
                text = assert_block_true(app, panel.body, f"session panel {size}")
                assert_figure(text, "spend", session.spend_usd, f"session panel {size}")
                assert_figure(text, "at", session.cost_per_hour_usd, f"session panel {size}")
                assert_figure(text, "idle", session.idle_spend_usd, f"session panel {size}")

        node = first_flagged(frame)
        app.open_node(node.name)
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.snapshot is frame)
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        body = screen.scroll_body
        blocks = [w for w in screen.query(Static) if w.display and not isinstance(w, RowTable)]
        texts: dict[str, str] = {}
        for _ in range(40):  # every block, scrolled into view page by page
            await pilot.pause()
            for block in blocks:
                if block.region.area:
                    texts[block.id or str(block)] = assert_block_true(app, block, f"node screen {size}")
            if body.scroll_y >= body.max_scroll_y:
                break
            await pilot.press("pagedown")
        assert "engine" in texts and "node-title" in texts, texts.keys()
        cost = re.search(r"\$[\d,]+(?:\.\d+)?[kMGT]?(?=/h)", texts["node-title"])
        assert cost is not None, texts["node-title"]
        assert_figure(cost[0], "", node.cost_per_hour_usd, f"node title {size}")
        engine = node.engine
        if engine is not None:
            assert_figure(texts["engine"], "decode steps/s", engine.decode_steps_per_s, f"engine {size}")
            assert_figure(texts["engine"], "tokens/s accepted", engine.accepted_tokens_per_s, f"engine {size}")
            assert_figure(texts["engine"], "requests running", engine.requests_running, f"engine {size}")
