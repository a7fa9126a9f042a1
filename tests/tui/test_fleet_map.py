"""The fleet map through the real app (issue 34, item 1): keys, Enter → node screen, the
filter, the look at 80x24 and 160x45, and 1,024 nodes whose three trouble nodes are all
on one 160x45 screen without scrolling.

Frames come from the real Monitor at fixed instants (`FrozenFeed`). The 1,024-node feed
is made once for the module (8,192 GPUs through five ticks takes seconds).
Update the pictures after an intended change: `pytest tests/tui/test_fleet_map.py --snapshot-update`.
"""

from __future__ import annotations

from functools import cache

import pytest
from rich.console import Console
from textual.widgets import Static

from infertop.monitor.fleet_map import node_map_state
from infertop.tui.app import InfertopApp
from infertop.tui.fleet_map_picture import GLYPH
from infertop.tui.help_screen import HelpScreen, help_table
from infertop.tui.node_screen import NodeScreen
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for

# the scripted trouble: two IB ports down, a straggler at 45 % of its peers, a silent node
TROUBLE = {"decode-0003": "critical", "decode-0407": "warning", "decode-0700": "stale"}


@cache
def fleet_1024() -> FrozenFeed:
    specs = [NodeSpec(f"prefill-{i:04d}", role="prefill", gpus=8, steps_per_s=None,
                      group=f"unit-{(i - 1) // 16 + 1:02d}") for i in range(1, 257)]
    specs += [NodeSpec(f"decode-{i:04d}", gpus=8, group=f"unit-{(i - 1) // 16 + 1:02d}",
                       steps_per_s=13.5 if i == 407 else 30.0,
                       down_nics=("mlx5_0", "mlx5_1") if i == 3 else (),
                       silent_after=2 if i == 700 else None)
              for i in range(1, 769)]
    # 4 s ticks: the verdicts' 10 s hold is passed within the five frames
    return FrozenFeed(specs, ticks=5, interval_s=4.0)


def sixteen() -> FrozenFeed:
    specs = [NodeSpec(f"prefill-{i:02d}", role="prefill", steps_per_s=None, group="rack-1")
             for i in range(1, 5)]
    specs += [NodeSpec(f"decode-{i:02d}", gpus=8, group=f"rack-{2 + (i - 1) // 6}",
                       down_nics=("mlx5_1",) if i == 3 else (), silent_after=2 if i == 9 else None)
              for i in range(1, 13)]
    return FrozenFeed(specs, ticks=5, interval_s=4.0)


async def settled(pilot, app: InfertopApp, feed: FrozenFeed) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1], timeout_s=60)
    await pilot.pause()


def glyph_on_screen(app: InfertopApp, name: str) -> str:
    """The character the terminal shows where the map placed `name`."""
    fleet_map = app.overview.fleet_map
    position = fleet_map.position_of(name)
    assert position is not None, name
    line, x = position
    y = line - round(fleet_map.scroll_offset.y)
    assert 0 <= y < fleet_map.scrollable_content_region.height - 1, (name, line)  # on screen
    row = screen_text(app).splitlines()[fleet_map.region.y + 1 + y]
    return row[fleet_map.region.x + x]


async def test_small_fleet_opens_on_the_table_and_f_shows_the_map() -> None:
    feed = sixteen()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        overview = app.overview
        assert not overview.map_shown and overview.table.display  # 16 nodes: the table
        await pilot.press("f")
        await pilot.pause()
        fleet_map = overview.fleet_map
        assert overview.map_shown and not overview.table.display
        assert app.focused is fleet_map
        assert fleet_map.cell_count == 16
        # a frame that changes no node's state draws no map line again (the lines are cached)
        drawn, frames = fleet_map.lines_rendered, app.frames_rendered
        app.publish(feed.frames[-1].model_copy())
        await wait_for(pilot, lambda: app.frames_rendered > frames)
        await pilot.pause()
        assert fleet_map.lines_rendered == drawn
        text = screen_text(app)
        assert "PREFILL 4 nodes" in text and "DECODE 12 nodes" in text and "rack-3" in text
        assert glyph_on_screen(app, "decode-03") == GLYPH["critical"]
        assert glyph_on_screen(app, "decode-09") == GLYPH["stale"]
        # arrows move cell to cell; Enter opens that node's screen
        assert fleet_map.current_key() == "prefill-01"
        await pilot.press("right", "right")
        assert fleet_map.current_key() == "prefill-03"
        await pilot.press("down")
        assert fleet_map.current_key() is not None
        assert fleet_map.current_key().startswith("decode-")  # type: ignore[union-attr]
        await pilot.press("left")
        await pilot.press("up")
        assert fleet_map.current_key() is not None and fleet_map.current_key().startswith("prefill-")  # type: ignore[union-attr]
        fleet_map._move(fleet_map._index["decode-03"])
        await pilot.pause()
        assert "decode-03" in screen_text(app).splitlines()[fleet_map.region.y]  # the detail line
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "decode-03"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is overview)
        assert overview.map_shown  # still the map when coming back
        await pilot.press("f")
        await pilot.pause()
        assert not overview.map_shown and app.focused is overview.table


async def test_filter_and_sort_apply_to_the_map() -> None:
    feed = sixteen()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        await pilot.press("f", "slash", *"decode-0", "enter")
        await pilot.pause()
        fleet_map = app.overview.fleet_map
        assert fleet_map.cell_count == 9  # decode-01 … decode-09
        assert "PREFILL" not in screen_text(app)
        assert app.focused is fleet_map  # Enter in the filter gives the keys back to the map
        await pilot.press("escape")
        await pilot.pause()
        assert fleet_map.cell_count == 16
        await pilot.press("s")  # worst first: within its group the link-starved node leads
        await pilot.pause()
        rack = [name for name, _, _ in fleet_map._picture.cells if name in
                {f"decode-0{i}" for i in range(1, 7)}]
        assert rack[0] == "decode-03"


async def test_help_lists_the_map_key() -> None:
    feed = sixteen()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        table = Console(width=200, record=True)
        table.print(help_table(app.help_scopes(), app.COMMAND_PALETTE_BINDING))
        rows = [line.split() for line in table.export_text().splitlines()]
        assert ["overview", "f", "The", "fleet", "map"] in [r[:5] for r in rows]
        assert ["fleet", "map", "Enter", "Open", "the", "node"] in [r[:6] for r in rows]
        legend_text = str(app.screen.query_one("#help-map-legend", Static).render())
        for state, glyph in GLYPH.items():
            assert f"{glyph} {state}" in legend_text


async def test_1024_nodes_show_all_three_troubles_on_one_screen() -> None:
    feed = fleet_1024()
    states = {n.name: node_map_state(n) for n in feed.frames[-1].nodes}
    assert {n: states[n] for n in TROUBLE} == TROUBLE
    assert sum(s != "ok" for s in states.values()) == len(TROUBLE)  # no other node in trouble
    app = InfertopApp(feed)  # every panel: the screen as users see it
    async with app.run_test(size=(160, 45)) as pilot:
        await settled(pilot, app, feed)
        overview = app.overview
        assert overview.map_shown  # 1,024 nodes: the map is what the overview opens on
        fleet_map = overview.fleet_map
        assert fleet_map.scroll_offset.y == 0 and not fleet_map.folded
        assert fleet_map.cell_count == 1024
        for name, state in TROUBLE.items():
            assert glyph_on_screen(app, name) == GLYPH[state]  # type: ignore[index]


SIZES = [(80, 24), (160, 45)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_fleet_map_look(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    feed = fleet_1024()
    app = InfertopApp(feed, panels=[])

    async def check(pilot) -> None:  # type: ignore[no-untyped-def]
        await settled(pilot, app, feed)
        fleet_map = app.overview.fleet_map
        assert fleet_map.folded == (size == (80, 24))  # 80x24: healthy nodes become counts
        for name, state in TROUBLE.items():
            assert glyph_on_screen(app, name) == GLYPH[state]  # type: ignore[index]

    assert snap_compare(app, terminal_size=size, run_before=check)
