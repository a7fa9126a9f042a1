"""The monitor's own lag in the header, as the monitor composed it; nothing when it keeps up."""

from __future__ import annotations

from infertop.monitor.health import health_view, suggestion
from infertop.tui.app import InfertopApp
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for


class LaggingFeed(FrozenFeed):
    def __init__(self, lagging: bool) -> None:
        super().__init__([NodeSpec("decode-01"), NodeSpec("decode-02")], ticks=3)
        view = health_view(
            interval_s=1.0, lag_s=1.4 if lagging else 0.02, stall_max_s=0.3 if lagging else 0.01,
            stalled_fraction=0.6 if lagging else 0.0, cpu_pct=100.0 if lagging else 12.0,
            nodes_excused=0, advice=suggestion(1.0, direct_nodes=128, has_prometheus=False),
        )
        self.frames = [f.model_copy(update={"monitor": view}) for f in self.frames]


async def test_a_lagging_monitor_says_so_in_the_header_with_the_fix() -> None:
    feed = LaggingFeed(lagging=True)
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        await pilot.pause()
        assert "⚠ monitor lagging: 1.4 s behind, CPU 100 % — try interval_s = 2 or the prom source" in screen_text(app)


async def test_a_monitor_that_keeps_up_says_nothing() -> None:
    feed = LaggingFeed(lagging=False)
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        await pilot.pause()
        assert "monitor lagging" not in screen_text(app)


async def test_a_warning_that_comes_and_goes_does_not_make_the_table_jump() -> None:
    """The header keeps the height its lag warning gave it for a while after the warning
    goes: a table that moved up and down every few seconds would be hard to read (and each
    move lays out the whole screen). Then it gives the row back."""
    lagging, calm = LaggingFeed(lagging=True), LaggingFeed(lagging=False)
    app = InfertopApp(lagging, panels=[])
    clock = [1000.0]
    async with app.run_test(size=(200, 40)) as pilot:
        header = app.overview.header_bar
        header.clock = lambda: clock[0]  # type: ignore[method-assign]
        await wait_for(pilot, lambda: app.overview.snapshot is lagging.frames[-1])
        app.publish(lagging.frames[-1])
        await pilot.pause()
        tall = header.size.height
        table_at = app.overview.table.region.y
        assert "monitor lagging" in screen_text(app)
        clock[0] += 5.0
        app.publish(calm.frames[-1])
        await wait_for(pilot, lambda: app.overview.snapshot is calm.frames[-1])
        await pilot.pause()
        assert "monitor lagging" not in screen_text(app)  # the warning itself goes at once
        assert header.size.height == tall and app.overview.table.region.y == table_at
        clock[0] += 31.0  # past the hold: the row is given back
        app.publish(calm.frames[-1].model_copy())
        await pilot.pause()
        await pilot.pause()
        assert header.size.height == tall - 1
        assert app.overview.table.region.y == table_at - 1


async def test_a_long_warning_on_a_narrow_terminal_keeps_its_fix_on_screen() -> None:
    # at 80 columns the warning takes several lines, and grows as the monitor finds more
    # to say: every line is shown (the header's height counts them), so the fix at its end
    # is never cut off
    feed = LaggingFeed(lagging=True)
    view = feed.frames[-1].monitor
    assert view is not None and view.reason is not None
    longer = view.model_copy(update={"reason": "0.1 s behind, readings not in time for 7 frames, loop "
                                     "blocked or saturated 0.5 s, CPU 83 %, 1 node read late, not blamed"})
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        await pilot.pause()
        assert "try interval_s = 2 or the prom source" in " ".join(screen_text(app).split())
        app.publish(feed.frames[-1].model_copy(update={"monitor": longer}))
        await pilot.pause()
        await pilot.pause()
        assert "not blamed — try interval_s = 2 or the prom source" in " ".join(screen_text(app).split())
