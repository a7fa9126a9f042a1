"""The node screen shows a node's engines as sub-rows, real activity beside util and who
holds each GPU (issue 35), from frames of the real Monitor (tests/support/ranks_cluster.py),
drawn through Pilot; hostile process text stays inert."""

from __future__ import annotations

from collections.abc import Callable

from infertop.monitor.snapshot import Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.node_screen import NodeScreen
from tests.support.ranks_cluster import ranks_layout, ranks_snapshots
from tests.support.tui_helpers import screen_text, wait_for


class FramesFeed:
    def __init__(self, frames: list[Snapshot]):
        self.frames = frames
        self.layout = ranks_layout(hold_s=0)

    async def start(self, publish: Callable[[Snapshot], None]) -> None:
        for frame in self.frames:
            publish(frame)

    async def stop(self) -> None:
        pass


async def test_engines_activity_and_processes_on_the_node_screen() -> None:
    feed = FramesFeed(ranks_snapshots(hold_s=0, stray=True))
    app = InfertopApp(feed, panels=[])  # type: ignore[arg-type]
    async with app.run_test(size=(200, 80)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        app.open_node("decode-05")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen)
                       and getattr(app.screen, "ranks_table", None) is not None
                       and app.screen.ranks_table.row_count == 4)
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        assert screen.ranks_table.get_cell("engine=2", "gpus").plain == "4–5"
        assert screen.ranks_table.get_cell("engine=2", "steps").plain == "12.0"
        assert screen.ranks_table.get_cell("engine=0", "steps").plain == "30.0"
        text = str(screen.activity_block.render())
        assert "ACTIVITY (gpm)" in text
        assert "GPU 6   util  100%  SM    1%" in text
        assert "pid 31337" in text and "[red]x[/red]" in text  # shown literally, not as markup
        await pilot.pause()
        shown = screen_text(app)
        assert "ENGINES (one row per data-parallel rank)" in shown
