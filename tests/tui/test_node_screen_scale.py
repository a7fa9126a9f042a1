"""The node screen tells a down port and a straggler apart at a glance (issue 18: Node
screen): a port that is down shows no speed (`—`), never its rated `400/400 Gb/s`, and
the sparklines share one scale across the node's pool (the scale is shown), so a node
doing less than its peers draws a lower line instead of a full one.

Frames from the real Monitor at fixed instants (`FrozenFeed`), drawn through Pilot.
"""

from __future__ import annotations

from infertop.tui.app import InfertopApp
from infertop.tui.node_screen import NodeScreen
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for

FULL = "█"


def pool() -> FrozenFeed:
    return FrozenFeed([
        NodeSpec("decode-01", steps_per_s=30.0, power_w=600.0),
        NodeSpec("decode-02", steps_per_s=30.0, power_w=600.0),
        # the straggler: a third of its peers' steps and power, and a port down
        NodeSpec("decode-03", steps_per_s=10.0, power_w=200.0, down_nics=("mlx5_1",)),
        NodeSpec("prefill-01", role="prefill", steps_per_s=None, power_w=900.0),
    ], ticks=6)


async def open_node(pilot, app: InfertopApp, feed: FrozenFeed, name: str) -> NodeScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
    # how many start-up frames were coalesced varies: start the history afresh
    app.history.clear()
    for frame in feed.frames:
        app.publish(frame)
        await pilot.pause()
    app.open_node(name)
    await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen) and app.screen.node == name
                   and getattr(app.screen, "nic_table", None) is not None
                   and app.screen.nic_table.row_count == 2)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, NodeScreen)
    return screen


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


async def test_a_down_port_shows_no_speed() -> None:
    feed = pool()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await open_node(pilot, app, feed, "decode-03")
        assert screen.nic_table.get_cell("mlx5_1", "speed").plain == "—/400 Gb/s"
        assert screen.nic_table.get_cell("mlx5_0", "speed").plain == "400/400 Gb/s"
        text = screen_text(app)
        assert "—/400 Gb/s" in line_with(text, "mlx5_1")
        assert "400/400" not in line_with(text, "mlx5_1")


async def test_sparklines_share_the_pools_scale() -> None:
    feed = pool()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(160, 45)) as pilot:
        await open_node(pilot, app, feed, "decode-01")
        peer = screen_text(app)
        app.pop_screen()
        await open_node(pilot, app, feed, "decode-03")
        straggler = screen_text(app)
    # the scale is the pool's, and it is shown
    for text in (peer, straggler):
        assert "sparklines on the decode pool's scale (3 nodes)" in text
        assert "power 0–610 W" in text  # the pool's busiest GPU, not the prefill's 900 W
        assert "(decode pool scale)" in line_with(text, "decode steps/s")
    # the peer's lines reach the top; the straggler's stay low (about a third)
    assert FULL in line_with(peer, "decode steps/s") and FULL not in line_with(straggler, "decode steps/s")
    peer_gpu, straggler_gpu = line_with(peer, "H200"), line_with(straggler, "H200")
    assert FULL in peer_gpu.split("W", 1)[1]  # the power sparkline after the POWER figure
    assert FULL not in straggler_gpu.split("W", 1)[1]
    assert "▃" in straggler_gpu.split("W", 1)[1]


def test_node_screen_look(snap_compare) -> None:  # type: ignore[no-untyped-def]
    feed = pool()
    app = InfertopApp(feed, panels=[])

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_node(pilot, app, feed, "decode-03")

    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


async def test_gpu_and_port_names_stay_when_scrolled_sideways() -> None:
    feed = pool()
    app = InfertopApp(feed, panels=[])
    async with app.run_test(size=(80, 30)) as pilot:
        screen = await open_node(pilot, app, feed, "decode-03")
        for table in (screen.gpu_table, screen.nic_table):
            table.scroll_to(x=60, animate=False)
        await pilot.pause()
        assert screen.gpu_table.scroll_offset.x > 0 and screen.nic_table.scroll_offset.x > 0
        text = screen_text(app)
        assert line_with(text, "GPU ").startswith("GPU ") and "NAME" not in line_with(text, "GPU ")
        assert line_with(text, "mlx5_1").startswith("mlx5_1")
