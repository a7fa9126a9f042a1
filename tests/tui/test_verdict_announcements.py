"""The hunt panel inside the real app: frames from a real Monitor, Pilot at the keys."""

from __future__ import annotations

from collections.abc import Sequence

from infertop.monitor.feeds import Publish
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.hunt_list import HuntList
from infertop.tui.hunt_panel import HuntPanel
from infertop.tui.node_screen import NodeScreen
from tests.support.toasts import ToastsShown, css_beside
from tests.support.tui_helpers import NodeSpec, make_layout, make_sample, screen_text, wait_for

START = 1_800_000_000.0
SPECS = [NodeSpec(f"decode-0{i}", gpus=1) for i in (1, 2, 3)] + [
    NodeSpec("decode-04", gpus=1, down_nics=("mlx5_1",))
]


class SteppedFeed:
    """Frames computed by a real Monitor at fixed instants; the test decides when each is published."""

    def __init__(self, specs: Sequence[NodeSpec], ticks: int) -> None:
        layout = make_layout(specs, interval_s=1.0)
        self.layout = layout.model_copy(
            update={"thresholds": layout.thresholds.model_copy(update={"hold_s": 2.0, "clear_s": 2.0})}
        )
        monitor = Monitor(self.layout, sources=[], clock=lambda: START)
        self.frames: list[Snapshot] = []
        for n in range(ticks):
            now = START + n
            for spec in specs:
                monitor.fleet.ingest(make_sample(spec, n, now, 1.0, "synthetic"))
            self.frames.append(monitor.tick(now=now))
        self.publish: Publish | None = None

    async def start(self, publish: Publish) -> None:
        self.publish = publish
        publish(self.frames[0])

    async def stop(self) -> None:
        self.publish = None


class SeenApp(ToastsShown, InfertopApp):
    """The app, its toasts read through the public notify API."""

    CSS_PATH = css_beside(InfertopApp)


async def test_verdict_starts_notifies_and_enter_opens_the_node() -> None:
    feed = SteppedFeed(SPECS, ticks=4)
    assert [n.verdicts for n in feed.frames[0].nodes] == [[], [], [], []]
    app = SeenApp(feed)
    async with app.run_test(size=(180, 50)) as pilot:
        panel = app.screen.query_one(HuntPanel)
        hunt = panel.query_one(HuntList)
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        # the first frame is before any verdict could be: judging, never "all clear"
        assert hunt.row_count == 0 and panel.border_title == "hunt list · judging — first verdicts in 3 s"
        assert app.frames.news is None

        assert feed.publish is not None
        feed.publish(feed.frames[3])
        await wait_for(pilot, lambda: hunt.row_count == 1)
        assert hunt.entries == [("decode-04", "link-starved")]
        assert panel.border_title == "hunt list · 1 verdict"
        # told in the header, where no figure sits; never a toast over the node table
        assert app.frames.news is not None and app.frames.news.plain == "new: decode-04 link-starved"
        await pilot.pause()
        assert "new: decode-04 link-starved" in screen_text(app).splitlines()[0]
        assert not app.toasts

        hunt.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "decode-04"


async def test_verdict_starting_behind_a_node_screen_is_announced_at_once() -> None:
    feed = SteppedFeed(SPECS, ticks=4)
    app = SeenApp(feed)
    async with app.run_test(size=(180, 50)) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        app.open_node("decode-01")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        assert feed.publish is not None
        feed.publish(feed.frames[3])
        await wait_for(pilot, lambda: app.frames_received >= 2)
        await pilot.pause()
        # told in the node screen's title line, above its tables
        assert "new: decode-04 link-starved" in screen_text(app).splitlines()[0]
        await pilot.press("escape")  # back on the overview: listed, not announced again
        await wait_for(pilot, lambda: app.screen.query_one(HuntList).row_count == 1)
        assert app.frames.news is not None and app.frames.news.plain == "new: decode-04 link-starved"
        assert not app.toasts
