"""The TUI through Textual's Pilot, fed by the real Monitor over a real in-memory Source."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import Input

from infertop.monitor.feeds import MonitorFeed
from infertop.tui.app import InfertopApp
from infertop.tui.columns import GREY, SORTS
from infertop.tui.help_screen import HelpScreen, bindings_of, key_label
from infertop.tui.messages import SnapshotArrived
from infertop.tui.node_screen import NodeScreen
from infertop.tui.node_table import NodeTable
from infertop.tui.overview import OverviewScreen
from infertop.tui.scoreboard_screen import ScoreboardScreen
from infertop.tui.scoreboard_text import node_points_table
from tests.support.help_pages import whole_help_text
from tests.support.tui_helpers import (
    FrozenFeed,
    NodeSpec,
    SyntheticSource,
    make_layout,
    screen_text,
    wait_for,
)

SIZE = (200, 45)
HOSTILE_NODE = "[red]evil[/]\x1b[31m"


def live_app(specs: list[NodeSpec], interval_s: float = 0.25) -> tuple[InfertopApp, MonitorFeed]:
    layout = make_layout(specs, interval_s=interval_s)
    feed = MonitorFeed(layout, sources=[SyntheticSource(specs, interval_s)])
    return InfertopApp(feed), feed


def cluster() -> list[NodeSpec]:
    return [
        NodeSpec("decode-01"),
        NodeSpec("decode-02", down_nics=("mlx5_1",)),
        NodeSpec("prefill-01", role="prefill", steps_per_s=None),
    ]


def rows(app: InfertopApp) -> list[str]:
    return app.overview.table.displayed_order()


async def test_overview_enter_node_screen_and_back() -> None:
    app, _ = live_app(cluster())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(rows(app)) == 3 and app.frames_rendered >= 3)
        text = screen_text(app)
        assert "decode-01" in text and "prefill-01" in text
        assert "1/2 up" in text  # decode-02 lost a port the layout expects
        await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        assert screen.node == "decode-02"
        await wait_for(pilot, lambda: screen.gpu_table.row_count == 2 and screen.nic_table.row_count == 2)
        text = screen_text(app)
        assert "power cap" in text  # GPU 1's clock-event reason, decoded
        assert "decode steps/s" in text and "full-acceptance" in text
        assert "▇" in text or "█" in text  # sparklines from the app's own history
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen))
        assert app.overview.table.current_key() == "decode-02"  # cursor kept its node


async def test_filter_and_inverted_filter() -> None:
    app, _ = live_app(cluster())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(rows(app)) == 3)
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"prefill")
        await wait_for(pilot, lambda: rows(app) == ["prefill-01"])
        await pilot.press("enter")  # keeps the filter, back to the table
        assert app.focused is app.overview.table
        await wait_for(pilot, lambda: app.frames_rendered >= 4)
        assert rows(app) == ["prefill-01"]  # a new frame honours the filter
        assert "filter prefill" in screen_text(app)
        # the count says what is shown, not what answers ("1/3" read as one node up)
        assert "showing 1 of 3 nodes" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(rows(app)) == 3)
        await wait_for(pilot, lambda: "nodes 3 " in screen_text(app))
        await pilot.press("slash", *"!decode")
        await wait_for(pilot, lambda: rows(app) == ["prefill-01"])
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(rows(app)) == 3)
        assert not app.overview.filter_input.display


async def test_help_lists_every_binding() -> None:
    app, _ = live_app(cluster())
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = await whole_help_text(pilot, app)  # it scrolls, by its own keys
        for _scope, bindings in app.help_scopes():
            for binding in bindings_of(bindings):
                assert (binding.key_display or key_label(binding.key)) in text
                assert (binding.tooltip or binding.description) in text
        assert "Ctrl+P" in text
        assert "Shift+Tab" in text and "node table → hunt list" in text  # as the README says
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen))
        # and Tab does it: from the node table to the next pane, Shift+Tab back
        await pilot.click(NodeTable)
        assert app.focused is app.overview.table
        await pilot.press("tab")
        assert app.focused is not app.overview.table
        await pilot.press("shift+tab")
        assert app.focused is app.overview.table


async def test_quit_stops_the_feed() -> None:
    app, feed = live_app(cluster())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, timeout_s=10)
    assert app.return_code in (0, None)
    assert feed.monitor._ticker is None  # the monitor was stopped, its sources cancelled
    assert all(t.done() for t in feed.monitor.fleet._tasks) and not feed.monitor.fleet._tasks


async def test_stale_node_is_greyed_with_its_age() -> None:
    specs = [NodeSpec("decode-01"), NodeSpec("gone-01", silent_after=3)]
    app, _ = live_app(specs, interval_s=0.2)
    async with app.run_test(size=SIZE) as pilot:
        table = app.overview.table

        def gone_status() -> str:
            return table.get_cell("gone-01", "status").plain if "gone-01" in table.shown_keys else ""

        await wait_for(pilot, lambda: gone_status().startswith(("stale", "UNREACH")))
        status = gone_status()
        assert status.split()[-1].endswith("s")  # its age, e.g. "stale 1s"
        util = table.get_cell("gone-01", "util")
        assert util.plain == "80%"  # the last value is still shown…
        assert any(GREY in str(span.style) for span in util.spans)  # …greyed
        fresh = table.get_cell("decode-01", "util")
        assert not any(GREY in str(span.style) for span in fresh.spans)


async def test_hostile_labels_are_inert() -> None:
    specs = [
        NodeSpec(
            HOSTILE_NODE,
            in_layout=False,  # a discovered node: its name never passed layout validation
            gpu_name="[bold magenta]GPU[/]\x1b]8;;http://evil\x1b\\x",
            nics=("[link=http://evil]ib0[/link]",),
            notes=["[blink]note[/] \x1b[2J cleared?"],
        ),
        NodeSpec("broken-01", error="[red]boom[/] \x1b[31mred"),
    ]
    app, _ = live_app(specs)
    async with app.run_test(size=SIZE) as pilot:
        table = app.overview.table
        await wait_for(pilot, lambda: HOSTILE_NODE in table.shown_keys and "broken-01" in table.shown_keys)
        name = table.get_cell(HOSTILE_NODE, "name")
        assert name.plain == "[red]evil[/]\\x1b[31m"  # markup and escape shown literally
        assert name.spans == []
        text = screen_text(app)
        assert "[red]evil[/]" in text and "\x1b" not in text
        table.move_cursor(row=table.row_index(HOSTILE_NODE))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.nic_table.row_count == 1)
        await pilot.pause()
        text = screen_text(app)
        assert "[link=http://evil]ib0[/link]" in text, text
        assert "[bold magenta]GPU[/]" in text
        assert "[blink]note[/]" in text and "cleared?" in text
        assert "\x1b" not in text
        await pilot.press("escape")
        table.move_cursor(row=table.row_index("broken-01"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.node == "broken-01")
        await pilot.pause()
        text = screen_text(app)
        assert "[red]boom[/]" in text and "\x1b" not in text


async def test_a_burst_of_frames_collapses_to_the_newest() -> None:
    feed = FrozenFeed([NodeSpec("decode-01")], ticks=30)
    app = InfertopApp(feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await pilot.pause()
        assert app.latest_snapshot is feed.frames[-1]
        assert app.frames_rendered < len(feed.frames)  # not one render per queued frame
        before = app.frames_rendered
        for frame in feed.frames:
            app.publish(frame)
        await wait_for(pilot, lambda: app.frames_rendered > before)
        await pilot.pause()
        assert app.frames_rendered == before + 1
        assert app.overview.snapshot is feed.frames[-1]
    assert feed.stopped


async def test_table_updates_in_place() -> None:
    feed = FrozenFeed([NodeSpec("decode-01"), NodeSpec("decode-02")], ticks=6)
    app = InfertopApp(feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        table = app.overview.table
        for frame in feed.frames[:4]:
            app.render_snapshot(frame)
        keys_before = table.displayed_order()
        updated = table.cells_updated
        app.render_snapshot(feed.frames[4])  # same figures as the frame before
        assert table.cells_updated == updated
        assert table.displayed_order() == keys_before
        changed = feed.frames[5].model_copy(
            update={"nodes": [feed.frames[5].nodes[0].model_copy(update={"cost_per_hour_usd": 99.0}),
                              feed.frames[5].nodes[1]]}
        )
        app.render_snapshot(changed)
        assert table.cells_updated == updated + 1  # exactly the $/h cell of decode-01
        assert table.get_cell("decode-01", "cost").plain == "$99.00"


async def test_sort_keys_step_through_columns_worst_first() -> None:
    specs = [NodeSpec("a-ok"), NodeSpec("b-broken", error="refused"), NodeSpec("c-ok", util_pct=10.0)]
    app, _ = live_app(specs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(rows(app)) == 3 and app.frames_rendered >= 3)
        assert rows(app) == ["a-ok", "b-broken", "c-ok"]
        sortable = [s.column for s in SORTS]
        for _ in range(sortable.index("status")):
            await pilot.press("greater_than_sign")
        assert app.overview.sort.column == "status"
        await wait_for(pilot, lambda: rows(app)[0] == "b-broken")
        assert app.overview.table.displayed_order() == rows(app)
        for _ in range(sortable.index("util") - sortable.index("status")):
            await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: rows(app) == ["c-ok", "a-ok", "b-broken"])  # idle first, unknown last
        await pilot.press("r")
        await wait_for(pilot, lambda: rows(app) == ["a-ok", "c-ok", "b-broken"])  # reversed, unknown still last
        await pilot.press("less_than_sign")
        assert app.overview.sort.column == sortable[sortable.index("util") - 1]


async def test_pause_freezes_rendering_not_collection() -> None:
    app, _ = live_app(cluster(), interval_s=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        await pilot.press("p")
        assert app.paused
        rendered, received = app.frames_rendered, app.frames_received
        await wait_for(pilot, lambda: app.frames_received >= received + 2)
        assert app.frames_rendered == rendered
        assert "PAUSED" in screen_text(app)
        await pilot.press("p")
        assert not app.paused
        # resuming draws the newest frame at once (a 0.2 s feed may add one more by now)
        assert app.frames_rendered >= rendered + 1
        assert app.overview.snapshot is app.latest_snapshot


async def test_command_palette_runs_actions() -> None:
    app, feed = live_app(cluster())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(rows(app)) == 3)
        await pilot.press("ctrl+p")
        await pilot.press(*"Pause / resume")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.paused)
        await pilot.press("ctrl+p")
        await pilot.press(*"Mark phase: warmup")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: feed.monitor.ledger.phase == "warmup")
        await pilot.press("ctrl+p")
        await pilot.press(*"Open node prefill-01")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.node == "prefill-01")


async def test_insecure_ssh_is_announced() -> None:
    app = InfertopApp(FrozenFeed([NodeSpec("decode-01")], insecure=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await pilot.pause()
        assert "SSH host-key checking is OFF" in screen_text(app)


@pytest.mark.parametrize("phase", ["bogus", ""])
def test_mark_phase_rejects_unknown_phases(phase: str) -> None:
    feed = MonitorFeed(make_layout([NodeSpec("decode-01")]), sources=[])
    with pytest.raises(ValueError, match="unknown phase"):
        feed.mark_phase(phase)


async def test_small_terminal_keeps_the_node_table_visible() -> None:
    app, _ = live_app(cluster())  # with every registered panel (hunt list, session, …)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(rows(app)) == 3)
        await pilot.pause()
        text = screen_text(app)
        assert "decode-01" in text and "decode-02" in text
        # the roll-up strip leaves columns out instead of wrapping or cutting a figure:
        # one screen line per pool row
        from infertop.tui.rollups import RollupStrip

        strip = app.overview.query_one(RollupStrip)
        # under 30 lines the roll-ups fold (the header keeps the cluster's essentials) so
        # that the node table keeps its rows (docs/tui.md, layouts per size)
        assert not strip.display or strip.size.height == 0
        await pilot.resize_terminal(100, 30)
        await wait_for(pilot, lambda: strip.size.height > 0)
        assert strip.size.height == len(app.latest_snapshot.cluster.roles) + 1 + 4  # type: ignore[union-attr]
        assert "FULL TOK/S" not in screen_text(app) and "TOK/S" in screen_text(app)


async def test_scoreboard_screen_on_b_and_its_line_on_the_overview() -> None:
    specs = [NodeSpec("decode-01", itl_s=0.03), NodeSpec("decode-02", itl_s=0.03),
             NodeSpec("prefill-01", role="prefill", steps_per_s=None)]
    app, _ = live_app(specs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 4 and app.latest_snapshot is not None
                       and app.latest_snapshot.session.output_tokens_per_s_per_gpu is not None)
        line = app.overview.scoreboard_line.render()
        assert "tok/s/GPU" in str(line) and "EP64" in str(line)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, ScoreboardScreen))
        await wait_for(pilot, lambda: "(25–50)" in screen_text(app))
        text = screen_text(app)
        # the live point beside the references, accepted and full acceptance labelled
        # (its exact figures are tested on fixed instants in tests/monitor)
        assert "accepted" in text and "full acceptance" in text
        assert "EP64" in text and "15,700" in text and "full-acceptance" in text
        assert "75.0%" in text  # prefix-cache hit rate
        assert "◆" in text and "●" in text
        # per node and pooled (the screen scrolls to it; drawn from the same snapshot)
        screen = app.screen
        assert isinstance(screen, ScoreboardScreen) and screen.snapshot is not None
        console = Console(width=160, record=True, file=io.StringIO())
        console.print(node_points_table(screen.snapshot))
        points = console.export_text()
        assert "decode pool" in points and "decode-01" in points
        assert "prefill-01" not in points  # no engine: no point
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert "Scoreboard" in screen_text(app) or "scoreboard" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen))


async def test_a_frame_that_arrives_as_the_app_closes_is_dropped() -> None:
    # the feed may send a frame the app handles after its screens are gone (seen with the
    # suite beside make bench: ScreenStackError from the handler); it is dropped quietly
    feed = FrozenFeed(cluster(), ticks=2)
    app = InfertopApp(feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
    assert not app.screen_stack
    rendered = app.frames_rendered
    app.on_snapshot_arrived(SnapshotArrived(feed.frames[-1]))
    assert app.frames_rendered == rendered and app.latest_snapshot is feed.frames[-1]
