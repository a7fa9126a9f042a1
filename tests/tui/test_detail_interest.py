"""The viewer tells its monitor which nodes it shows (a hint passed down through the feed;
the viewer reads nothing itself), so that a source reading per-GPU detail for only some
nodes a tick reads theirs every tick; and the header says how much detail a tick read,
fitted by the one rule (monitor/format.py)."""

from __future__ import annotations

from infertop.monitor.feeds import MonitorFeed
from infertop.monitor.format import detail_forms
from infertop.monitor.snapshot import DetailView, Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.header import header_text
from infertop.tui.node_screen import NodeScreen
from infertop.tui.overview import OverviewScreen
from tests.support.tui_helpers import NodeSpec, SyntheticSource, make_layout, wait_for

SPECS = [NodeSpec(f"decode-{i:02d}") for i in range(1, 41)]


def live_app() -> tuple[InfertopApp, MonitorFeed]:
    layout = make_layout(SPECS, interval_s=0.25)
    feed = MonitorFeed(layout, sources=[SyntheticSource(SPECS, 0.25)])
    return InfertopApp(feed), feed


async def test_the_rows_on_screen_and_the_node_screen_are_the_nodes_in_view() -> None:
    app, feed = live_app()
    async with app.run_test(size=(160, 24)) as pilot:
        table = app.overview.table
        await wait_for(pilot, lambda: table.row_count == 40 and app.frames_rendered >= 3)
        on_screen = table.keys_on_screen()
        assert 5 <= len(on_screen) < 40 and on_screen[0] == table.displayed_order()[0]
        await wait_for(pilot, lambda: list(feed.monitor.in_view) and set(feed.monitor.in_view) == set(on_screen))
        await pilot.press("end")  # the last rows come into view
        await wait_for(pilot, lambda: "decode-40" in feed.monitor.in_view)
        assert "decode-01" not in feed.monitor.in_view
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        await wait_for(pilot, lambda: feed.monitor.in_view == {"decode-40"})
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen) and len(feed.monitor.in_view) > 1)


def frame_with(detail: DetailView | None) -> Snapshot:
    specs = [NodeSpec("decode-01")]
    feed = MonitorFeed(make_layout(specs, interval_s=1.0), sources=[SyntheticSource(specs, 1.0)])
    return feed.monitor.tick(now=0.0).model_copy(update={"detail": detail})


def test_the_header_says_how_much_detail_a_tick_read() -> None:
    forms = detail_forms(124, 1250, 30.0)
    partial = DetailView(nodes=124, of=1250, every_s=30.0, wanted=40, note=forms[0])
    wide = header_text(frame_with(partial)).plain
    assert "detail for 124 of 1,250 nodes this tick; every node within 30 s" in wide
    narrow = header_text(frame_with(partial), width=30).plain
    assert "detail 124/1,250, all ≤ 30 s" in narrow and "this tick" not in narrow
    # every node every tick (a small fleet), or no prom source: nothing to say
    whole = DetailView(nodes=16, of=16, note=detail_forms(16, 16, None)[0])
    assert "detail" not in header_text(frame_with(whole)).plain
    assert "detail" not in header_text(frame_with(None)).plain
