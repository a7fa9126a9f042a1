"""The hunt list's detail line and click-to-open in the real app (issue 18: Hunt list).

Frames from the real Monitor at fixed instants (`FrozenFeed`); nodes that answer with an
error carry an `error` verdict at once (status verdicts need no hold), with the error as
its evidence: long enough that the table cuts it, so only the detail line shows it all.
"""

from __future__ import annotations

import datetime as dt

from infertop.tui.app import InfertopApp
from infertop.tui.hunt_list import HuntList, fmt_since
from infertop.tui.hunt_panel import HuntPanel
from infertop.tui.node_screen import NodeScreen
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for

LONG_ERROR = ("engine endpoint http://decode-02:8000/metrics answered 503 Service Unavailable "
              "after 5.0 s; the last good scrape was 42 s ago; check the engine's log on the node "
              "(END-OF-EVIDENCE)")


def cluster() -> FrozenFeed:
    return FrozenFeed([
        NodeSpec("decode-01"),
        NodeSpec("decode-02", error=LONG_ERROR),
        NodeSpec("decode-03", error="refused"),
        NodeSpec("prefill-01", role="prefill", steps_per_s=None),
    ], ticks=5)


async def settled(pilot, app: InfertopApp, feed: FrozenFeed) -> HuntList:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
    await pilot.pause()
    return app.overview.query_one(HuntList)


def test_since_is_a_clock_time() -> None:
    t = dt.datetime(2027, 1, 15, 6, 41, 12, tzinfo=dt.UTC).timestamp()
    assert fmt_since(t, t + 180) == "06:41:12 UTC (3m ago)"
    assert fmt_since(t, t + 86_400) == "2027-01-15 06:41:12 UTC (24.0h ago)"
    assert fmt_since(None, t) == "unknown"


def test_detail_line_shows_the_whole_evidence(snap_compare) -> None:  # type: ignore[no-untyped-def]
    feed = cluster()
    app = InfertopApp(feed, panels=[HuntPanel()])

    async def check(pilot) -> None:  # type: ignore[no-untyped-def]
        hunt = await settled(pilot, app, feed)
        assert [node for node, _ in hunt.entries] == ["decode-02", "decode-03"]
        text = screen_text(app)
        # the table cuts the evidence; the detail line under the list has all of it
        assert "(END-OF-EVIDENCE)" in " ".join(line.strip(" │") for line in text.splitlines())
        since = feed.frames[-1].nodes[1].verdicts[0].since
        assert since is not None
        clock = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%H:%M:%S UTC")
        assert f"since {clock}" in text
        detail = app.overview.query_one("#hunt-detail")
        long_height = detail.size.height
        assert long_height > 1  # the long evidence wraps
        hunt.focus()
        await pilot.press("down")  # the detail follows the cursor
        await pilot.pause()
        assert "refused" in screen_text(app) and "END-OF-EVIDENCE" not in screen_text(app)
        # a text of fewer lines reflows: the detail shrinks to it (a text of as many lines
        # as the one shown is set without a reflow)
        assert detail.size.height < long_height

    assert snap_compare(app, terminal_size=(160, 45), run_before=check)


async def test_clicking_the_selected_hunt_row_opens_its_node() -> None:
    feed = cluster()
    app = InfertopApp(feed, panels=[HuntPanel()])
    async with app.run_test(size=(160, 45)) as pilot:
        hunt = await settled(pilot, app, feed)
        await pilot.click(HuntList, offset=(2, 2))  # line 0 is the header: the second verdict
        await pilot.pause()
        assert hunt.current() == ("decode-03", "error") and not isinstance(app.screen, NodeScreen)
        assert "error on decode-03" in screen_text(app)  # selecting shows its detail line
        await pilot.click(HuntList, offset=(2, 2))  # the selected row again: open it
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen))
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "decode-03"
