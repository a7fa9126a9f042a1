"""A frame redraws what changed; it does not lay out the whole screen again.

A layout pass re-measures every widget (the 128-row node table among them). The header
changes every frame (the session clock), the session panel and the roll-up strip every
tick: updating them must not ask for a layout unless their height can change.
"""

from __future__ import annotations

import datetime as dt

from infertop.monitor.snapshot import Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.session_panel import SessionPanel
from tests.support.tui_helpers import FrozenFeed, NodeSpec, wait_for


def next_frame(frame: Snapshot, k: int) -> Snapshot:
    """The same cluster k seconds later: the clock, spend and throughput moved on."""
    s = frame.session
    session = s.model_copy(update={
        "elapsed_s": s.elapsed_s + k,
        "spend_usd": (s.spend_usd or 0.0) + 0.01 * k,
        "accepted_tokens_per_s": (s.accepted_tokens_per_s or 0.0) + k,
        # a long note, so that a line wraps (the panel must count wrapped rows)
        "notes": ["decode-01 generation_tokens_total went down twice within 60 s: not a "
                  "counter to trust, so its steps are not counted in the session's tokens"],
    })
    total = frame.cluster.total.model_copy(update={"accepted_tokens_per_s": 1000.0 + k})
    cluster = frame.cluster.model_copy(update={"total": total})
    taken_at = (dt.datetime.fromisoformat(frame.taken_at) + dt.timedelta(seconds=k)).isoformat()
    return frame.model_copy(update={"session": session, "cluster": cluster, "taken_at": taken_at})


async def test_steady_frames_lay_out_nothing() -> None:
    specs = [NodeSpec("decode-01"), NodeSpec("decode-02"), NodeSpec("prefill-01", role="prefill")]
    feed = FrozenFeed(specs, ticks=4)
    app = InfertopApp(feed)  # every panel: hunt list, session
    async with app.run_test(size=(180, 40)) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is feed.frames[-1])
        first = next_frame(feed.frames[-1], 0)  # with the long note: the panel's height
        app.publish(first)
        await wait_for(pilot, lambda: app.overview.snapshot is first)
        await pilot.pause()
        screen = app.screen
        layouts: list[int] = []
        lay_out = screen._refresh_layout

        def counted(*args: object, **kwargs: object) -> None:
            layouts.append(1)
            lay_out(*args, **kwargs)  # type: ignore[arg-type]

        screen._refresh_layout = counted  # type: ignore[method-assign]
        shown = []
        for k in range(1, 6):
            frame = next_frame(feed.frames[-1], k)
            app.publish(frame)
            await wait_for(pilot, lambda frame=frame: app.overview.snapshot is frame)  # type: ignore[misc]
            await pilot.pause()
            shown.append(str(app.overview.rollups.content))
        assert len(set(shown)) == 5  # every frame did reach the screen
        assert layouts == []
        # and the panels are as tall as what they hold (a long note line wraps here)
        panel = app.query_one(SessionPanel)
        assert panel.body.row_count > len(panel.body.lines)
        assert panel.body.size.height == panel.body.row_count
