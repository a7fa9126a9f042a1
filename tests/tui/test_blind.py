"""A blind node through the TUI (Pilot, real Monitor over a real in-memory Source): the
header counts it, the node table and the hunt list show the verdict with its reason, and
the node screen lists what cannot be seen and why."""

from __future__ import annotations

from infertop.monitor.feeds import MonitorFeed
from infertop.monitor.snapshot import Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.header import header_text
from infertop.tui.node_screen import NodeScreen
from tests.support.tui_helpers import NodeSpec, SyntheticSource, make_layout, screen_text, wait_for

SIZE = (200, 45)
INTERVAL_S = 0.25
REFUSED = "cannot connect to http://decode-02:9100/metrics"
REASON = f"links unknown: node_exporter page failed ({REFUSED})"


def blind_app() -> InfertopApp:
    specs = [NodeSpec("decode-01"), NodeSpec("decode-02", dead_node_exporter=REFUSED)]
    layout = make_layout(specs, interval_s=INTERVAL_S)
    # a short hold: the verdict shows after about a second instead of ten
    layout = layout.model_copy(
        update={"thresholds": layout.thresholds.model_copy(update={"hold_s": 1.0, "clear_s": 1.0})}
    )
    return InfertopApp(MonitorFeed(layout, sources=[SyntheticSource(specs, INTERVAL_S)]))


async def test_header_counts_blind_nodes_and_the_node_screen_says_why() -> None:
    app = blind_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "blind on 1 node" in screen_text(app))

        def blind_rows() -> list[str]:
            return [line for line in screen_text(app).splitlines() if "decode-02" in line and "blind" in line]

        # the node table's verdict column, the hunt list with its reason (cut to the panel),
        # and the hunt list's detail line under it
        await wait_for(pilot, lambda: len(blind_rows()) >= 2)
        text = screen_text(app)
        assert "blind on 1 nodes" not in text
        assert not any("decode-01" in line and "blind" in line for line in text.splitlines())
        assert "links unknown" in "".join(blind_rows()), blind_rows()
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        await wait_for(pilot, lambda: f"unseen: {REASON}" in screen_text(app))
        assert f"blind: {REASON}" in screen_text(app)


def test_header_words() -> None:
    feed = blind_app().feed
    assert isinstance(feed, MonitorFeed)
    frame: Snapshot = feed.monitor.tick(now=0.0)
    assert frame.cluster.blind_nodes == 0  # nothing has been read yet
    assert "blind on" not in header_text(frame).plain
    one = frame.model_copy(update={"cluster": frame.cluster.model_copy(update={"blind_nodes": 1})})
    assert "blind on 1 node" in header_text(one).plain and "1 nodes" not in header_text(one).plain
    several = frame.model_copy(update={"cluster": frame.cluster.model_copy(update={"blind_nodes": 3})})
    assert "blind on 3 nodes" in header_text(several).plain
