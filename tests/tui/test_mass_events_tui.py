"""Mass events in the real app, Pilot at the keys: one hunt-list row for a group of nodes
that went unreachable together, told in one line of the header (never a toast over the
table), a burst gathered into that line."""

from __future__ import annotations

from typing import Any

from infertop.monitor.feeds import Publish
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import NodeView, Snapshot, VerdictView
from infertop.tui.announcer import NEWS_SHOWN_S, VerdictAnnouncer
from infertop.tui.app import InfertopApp
from infertop.tui.hunt_list import HuntList
from infertop.tui.hunt_panel import HuntPanel
from infertop.tui.node_screen import NodeScreen
from tests.support.toasts import ToastsShown, css_beside
from tests.support.tui_helpers import NodeSpec, make_layout, make_sample, screen_text, wait_for

START = 1_800_000_000.0
# twelve nodes; decode-04…decode-09 stop answering together (a switch), decode-12 has a
# port down from the start (a real problem that must not be buried)
SPECS = [
    NodeSpec(f"decode-{i:02d}", gpus=1, silent_after=4 if 4 <= i <= 9 else None,
             down_nics=("mlx5_1",) if i == 12 else ())
    for i in range(1, 13)
]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SteppedFeed:
    """Frames of a real Monitor at fixed instants; the test publishes them one by one."""

    def __init__(self, ticks: int) -> None:
        layout = make_layout(SPECS, interval_s=1.0)
        layout = layout.model_copy(
            update={"thresholds": layout.thresholds.model_copy(update={"hold_s": 2.0, "clear_s": 2.0})}
        )
        self.layout = layout  # a feed names its layout (SnapshotFeed)
        monitor = Monitor(layout, sources=[], clock=lambda: START)
        self.frames: list[Snapshot] = []
        for n in range(ticks):
            for spec in SPECS:
                if spec.silent_after is None or n < spec.silent_after:
                    monitor.fleet.ingest(make_sample(spec, n, START + n, 1.0, "synthetic"))
            self.frames.append(monitor.tick(now=START + n))
        self.publish: Publish | None = None

    async def start(self, publish: Publish) -> None:
        self.publish = publish
        publish(self.frames[0])

    async def stop(self) -> None:
        self.publish = None


def first(frames: list[Snapshot], check: Any) -> Snapshot:
    return next(f for f in frames if check(f))


class SeenApp(ToastsShown, InfertopApp):
    """The app, its toasts read through the public notify API."""

    CSS_PATH = css_beside(InfertopApp)


def news(app: InfertopApp) -> str | None:
    return None if app.frames.news is None else app.frames.news.plain


async def test_a_switch_drop_is_one_row_and_one_line_beside_the_real_problem() -> None:
    feed = SteppedFeed(ticks=12)
    starved = first(feed.frames, lambda f: any(v.kind == "link-starved" for n in f.nodes for v in n.verdicts))
    grouped = first(feed.frames, lambda f: [(g.kind, len(g.nodes)) for g in f.verdict_groups] == [("unreachable", 6)])
    assert feed.frames.index(starved) < feed.frames.index(grouped)
    clock = Clock()
    app = SeenApp(feed)
    app.verdict_announcer = VerdictAnnouncer(clock=clock)
    async with app.run_test(size=(200, 50)) as pilot:
        hunt = app.screen.query_one(HuntPanel).query_one(HuntList)
        await wait_for(pilot, lambda: app.frames_rendered >= 1)
        assert feed.publish is not None
        feed.publish(starved)
        await wait_for(pilot, lambda: hunt.row_count == 1)
        assert news(app) == "new: decode-12 link-starved"
        await pilot.pause()
        assert "new: decode-12 link-starved" in screen_text(app).splitlines()[0]  # in the header

        clock.now += 1.0  # a second later the switch drops: it joins the line, one item
        feed.publish(grouped)
        await wait_for(pilot, lambda: hunt.row_count == 2)
        assert hunt.entries == [("6 nodes", "unreachable"), ("decode-12", "link-starved")]
        cells = [c.plain for c in hunt.get_row(hunt.displayed_order()[0])]
        assert (cells[0], cells[2]) == ("1", "6 nodes")
        assert cells[6].startswith("6 nodes unreachable since ") and cells[6].endswith(": decode-04…decode-09")
        panel = app.screen.query_one(HuntPanel)
        assert panel.border_title == "hunt list · 7 verdicts · 1 mass event"
        assert news(app) == "7 new: decode-12 link-starved, 6 nodes unreachable"
        assert app.frames.news is not None and app.frames.news.style == "bold red"
        assert not app.toasts  # never a toast over the node table

        clock.now += NEWS_SHOWN_S  # nothing new since: the line goes
        feed.publish(feed.frames[-1])
        await wait_for(pilot, lambda: app.frames_received >= 4)
        await pilot.pause()
        assert news(app) is None and "new:" not in screen_text(app)

        hunt.focus()
        hunt.move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "decode-04"


def _nodes(verdicts: dict[str, str]) -> list[NodeView]:
    return [
        NodeView(name=name, role="decode", status="ok",
                 verdicts=[VerdictView(kind=kind, detail=f"{kind} on {name}", severity="warning")])
        for name, kind in verdicts.items()
    ]


def test_the_news_line_gathers_a_burst_and_goes() -> None:
    clock = Clock()
    announcer = VerdictAnnouncer(clock=clock)

    def shown(verdicts: dict[str, str]) -> str | None:
        announcer.observe(_nodes(verdicts))
        line = announcer.line()
        return None if line is None else line.plain

    assert shown({}) is None
    assert shown({"a": "idle"}) == "new: a idle"
    # two more verdicts start over the next two seconds: they join the line
    clock.now = 1.0
    assert shown({"a": "idle", "b": "straggler"}) == "2 new: a idle, b straggler"
    clock.now = 2.0
    assert shown({"a": "idle", "b": "straggler", "c": "idle"}) == "3 new: a idle, b straggler, c idle"
    # nothing new: the line stays its time, then goes
    clock.now = 2.0 + NEWS_SHOWN_S - 0.1
    assert shown({"a": "idle", "b": "straggler", "c": "idle"}) == "3 new: a idle, b straggler, c idle"
    clock.now = 2.0 + NEWS_SHOWN_S
    assert shown({"a": "idle", "b": "straggler", "c": "idle"}) is None
    # a verdict starting after that is a new line of its own
    assert shown({"a": "idle", "b": "straggler", "c": "idle", "d": "idle"}) == "new: d idle"
