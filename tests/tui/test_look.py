"""The look, frozen: the overview and a node screen from deterministic frames.

Frames come from the real Monitor at fixed instants (`FrozenFeed`), so the picture only
changes when the TUI's look does. Plug-in panels (hunt list, session) are left out so
that their own changes do not churn this picture; they have their own tests.
Update after an intended change: `pytest tests/test_tui_snapshot.py --snapshot-update`.
"""

from __future__ import annotations

from infertop.tui.app import InfertopApp
from tests.support.tui_helpers import FrozenFeed, NodeSpec, wait_for

SIZE = (180, 34)


def frozen_cluster() -> FrozenFeed:
    specs = [
        NodeSpec("prefill-01", role="prefill", steps_per_s=None, util_pct=55.0),
        NodeSpec("decode-01", gpus=4),
        NodeSpec("decode-02", gpus=4, down_nics=("mlx5_1",), util_pct=3.0, steps_per_s=12.0),
        NodeSpec("decode-03", gpus=4, silent_after=2),
    ]
    return FrozenFeed(specs, ticks=5)


def test_overview_look(snap_compare) -> None:  # type: ignore[no-untyped-def]
    feed = frozen_cluster()
    app = InfertopApp(feed, panels=[])

    async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_node_screen_look(snap_compare) -> None:  # type: ignore[no-untyped-def]
    feed = frozen_cluster()
    app = InfertopApp(feed, panels=[])

    async def open_node(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        # how many start-up frames were coalesced varies: start the history afresh, so
        # the sparklines hold exactly these five points
        app.history.clear()
        for frame in feed.frames:
            app.publish(frame)
            await pilot.pause()
        # the look of the screen, not of the news line: whether the replayed frames
        # announce decode-03 going stale again depends on the start-up frames coalesced
        app.frames.news = None
        app.overview.table.move_cursor(row=2)
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_node)
