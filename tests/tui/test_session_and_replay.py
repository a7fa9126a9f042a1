"""The session in the TUI: the panel, the phase key, the live record, and replay with
pause and seek — through Textual's Pilot over the real Monitor and a real record file."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from pathlib import Path

from infertop.cli.tui import live_feed
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.recording import Recording
from infertop.monitor.record.replay import ReplayFeed
from infertop.monitor.record.store import Recorder
from infertop.monitor.snapshot import SessionView, Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.header import header_text
from infertop.tui.history import SpendHistory
from infertop.tui.replay_app import ReplayApp
from infertop.tui.session_panel import PhasePicker, SessionPanel, budget_bar, session_lines
from tests.support.toasts import ToastsShown, css_beside
from tests.support.tui_helpers import (
    FrozenFeed,
    NodeSpec,
    SyntheticSource,
    make_layout,
    screen_text,
    wait_for,
)
from tests.support.waiting import until_async

SIZE = (200, 50)


def specs() -> list[NodeSpec]:
    return [NodeSpec("decode-01"), NodeSpec("prefill-01", role="prefill")]


def test_panel_lines_and_budget_bar() -> None:
    feed = FrozenFeed(specs(), ticks=4)
    s = feed.frames[-1].session
    text = "\n".join(line.plain for line in session_lines(s, SpendHistory(), 10))
    assert f"spend ${s.spend_usd:,.2f}" in text
    assert "10% of $100" in text and "phase run" in text
    assert "by phase run" in text and "API-equivalent" in text
    assert "record off" in text
    assert budget_bar(0.5, 10).plain == "█" * 5 + "░" * 5
    assert budget_bar(1.2, 10).plain == "█" * 10
    assert budget_bar(None, 4).plain == "────"


def test_panel_says_how_long_the_phase_has_run() -> None:
    s = FrozenFeed(specs(), ticks=4).frames[-1].session
    failed = s.model_copy(update={"phase": "failed", "phase_elapsed_s": 2.0, "elapsed_s": 7320.0})
    head = session_lines(failed, SpendHistory(), 10)[0].plain
    assert head.endswith("phase failed  for 0m02s"), head


def test_panel_says_which_stretch_the_token_figures_cover() -> None:
    s = FrozenFeed(specs(), ticks=4).frames[-1].session.model_copy(update={
        "usd_per_million_span": "watched", "tokens_since": "2027-01-15T07:59:30+00:00",
        "span_spend_usd": 0.25, "span_s": 240.0,
    })
    text = "\n".join(line.plain for line in session_lines(s, SpendHistory(), 10))
    assert "tokens counted from 2027-01-15 07:59 UTC" in text
    assert f"against the $0.25 spent over the same stretch, not the whole ${s.spend_usd:,.2f}" in text
    # the $/1M line itself says which stretch it covers (issue 45)
    per_million = next(line for line in text.splitlines() if line.startswith("$/1M tok"))
    assert "over the last 4 min watched" in per_million
    whole = s.model_copy(update={"usd_per_million_span": "reservation"})
    text = "\n".join(line.plain for line in session_lines(whole, SpendHistory(), 10))
    assert "tokens counted from" not in text and "watched" not in text


async def test_session_panel_in_the_overview() -> None:
    feed = FrozenFeed(specs(), ticks=5)
    app = InfertopApp(feed)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        panel = app.overview.query_one(SessionPanel)
        await wait_for(pilot, lambda: panel.last_taken_at == feed.frames[-1].taken_at)
        assert 1 <= len(panel.history.times) <= 5  # a burst of frames collapses to the latest
        last = feed.frames[-1].session
        await wait_for(pilot, lambda: "API-equivalent" in screen_text(app))
        text = screen_text(app)
        # the spend on the panel's first line (not its title: a title that changed each
        # frame repainted the whole panel)
        assert f"spend ${last.spend_usd:,.2f}" in text and "─ session ─" in text
        assert "runs out in" in text and "by phase run" in text


def test_one_budget_figure_before_and_past_the_budget() -> None:
    """Header and panel say the same: 99.6 % is "99%" with a time left, never "100 %"
    before the budget is reached; past it, "over by $X" and no "runs out in"."""
    s = FrozenFeed(specs(), ticks=4).frames[-1].session
    frame = FrozenFeed(specs(), ticks=4).frames[-1]
    near = ledger_view(budget=s.spend_usd / 0.996)  # type: ignore[operator]
    over = ledger_view(budget=s.spend_usd - 2.4)  # type: ignore[operator]
    for view, words in ((near, "99% of $"), (over, "over by $2.40 of $")):
        head = header_text(frame.model_copy(update={"session": view})).plain
        panel = "\n".join(line.plain for line in session_lines(view, SpendHistory(), 10))
        assert f"budget {view.budget_label}" in head and view.budget_label in panel
        assert words in head and "100%" not in head + panel
    assert "runs out in" in "\n".join(line.plain for line in session_lines(near, SpendHistory(), 10))
    assert "runs out in" not in "\n".join(line.plain for line in session_lines(over, SpendHistory(), 10))


def ledger_view(budget: float) -> SessionView:
    feed = FrozenFeed(specs(), ticks=4)
    feed.monitor.ledger.budget_usd = budget
    return feed.monitor.ledger.view(feed.monitor.ledger.last_at or 0.0)


async def test_panel_title_and_header_agree_past_the_budget() -> None:
    feed = FrozenFeed(specs(), ticks=5, budget_usd=2.0)  # $10/h for an hour: $8 over
    app = InfertopApp(feed)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        panel = app.overview.query_one(SessionPanel)
        await wait_for(pilot, lambda: panel.last_taken_at == feed.frames[-1].taken_at)
        label = feed.frames[-1].session.budget_label or ""
        assert label.startswith("over by $8.0")
        text = screen_text(app)
        assert f"budget {label}" in text  # the header
        assert f"session · budget {label}" in text
        assert "runs out in" not in text and "100%" not in text


async def test_phase_key_marks_the_live_session(tmp_path: Path) -> None:
    layout = make_layout(specs(), interval_s=0.25)
    feed = live_feed(layout, str(tmp_path / "live.sqlite"))
    feed.monitor.sources[:] = []  # replaced below by the in-memory source
    feed.monitor.fleet.sources = [SyntheticSource(specs(), 0.25)]
    app = InfertopApp(feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.frames_rendered >= 2)
        assert "live.sqlite" in screen_text(app)  # the record's path is shown
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PhasePicker))
        await pilot.press("up", "up", "enter")  # from "run" up to "load"
        await wait_for(pilot, lambda: app.latest_snapshot is not None
                       and app.latest_snapshot.session.phase == "load")
        await wait_for(pilot, lambda: "phase load" in screen_text(app))
    # the app stopped the feed: the record is closed as a clean end, phases and all
    rec = Recording.load(tmp_path / "live.sqlite")
    try:
        assert rec.meta.get("ended_at") is not None
        assert rec.ledger is not None and rec.ledger.phase == "load"
        assert [p for _, p in rec.ledger.marks] == ["load"]
        assert len(rec.ticks) >= 2
    finally:
        rec.close()


def make_recording(tmp_path: Path, ticks: int = 30) -> tuple[Path, list[Snapshot]]:
    layout = make_layout(specs(), interval_s=1.0)
    start = 1_800_000_000.0
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", now=start)
    monitor = Monitor(layout, sources=[], clock=lambda: start, recorder=recorder)
    frames = [monitor.tick(start + i * 10.0) for i in range(ticks)]  # one frame per 10 s
    recorder.close()
    return recorder.path, frames


async def test_replay_feed_pause_and_seek(tmp_path: Path) -> None:
    path, frames = make_recording(tmp_path)
    feed = ReplayFeed.open(path, speed=1000.0)
    got: list[Snapshot] = []
    await feed.start(got.append)
    try:
        assert got[0] == frames[0]
        feed.pause()
        feed.seek(95.0)  # from the first frame, 95 s on: the frame at 100 s
        assert got[-1] == frames[10] and feed.paused
        feed.seek(-1000.0)
        assert got[-1] == frames[0]
        feed.seek_index(29)
        assert got[-1] == frames[29]
        feed.seek_index(5)
        feed.resume()
        await until_async(lambda: feed.finished, 30, "the replay to finish", every_s=0.01)
        assert feed.finished and got[-1] == frames[-1]
        assert got[-25:] == frames[5:]  # played on in order from where it was sought
    finally:
        await feed.stop()


async def test_replay_app_keys(tmp_path: Path) -> None:
    path, frames = make_recording(tmp_path)
    feed = ReplayFeed.open(path, speed=0.5)  # 20 s per frame: nothing moves on its own
    app = ReplayApp(feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot == frames[0])
        await pilot.press("space")
        assert feed.paused
        # +1 min from the frame the feed stands on (a slow start may have moved it past the
        # first before the pause: the frames are 10 s apart)
        at = feed.index - 1
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: app.latest_snapshot == frames[at + 6])
        await pilot.press("9")
        await wait_for(pilot, lambda: app.latest_snapshot == frames[-1])
        await pilot.press("0")
        await wait_for(pilot, lambda: app.latest_snapshot == frames[0])
        assert "replay 1/30" in app.sub_title
        await pilot.press("m")  # a recording's phases cannot be changed
        assert not isinstance(app.screen, PhasePicker)


def test_replay_refuses_a_record_without_ticks(tmp_path: Path) -> None:
    path, _ = make_recording(tmp_path, ticks=1)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM ticks")
    conn.commit()
    conn.close()
    from infertop.cli.main import main

    assert main(["replay", str(path)]) == 2


class SeenReplayApp(ToastsShown, ReplayApp):
    """The replay app, its toasts read through the public notify API."""

    CSS_PATH = css_beside(InfertopApp)


async def test_replay_bar_shows_position_and_paused_and_no_phase_key(tmp_path: Path) -> None:
    path, frames = make_recording(tmp_path)
    feed = ReplayFeed.open(path, speed=0.5)  # 20 s per frame: nothing moves on its own
    app = SeenReplayApp(feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot == frames[0])
        await wait_for(pilot, lambda: "PLAYING" in screen_text(app))
        text = screen_text(app)
        # 30 frames 10 s apart: 4m50s recorded; the first frame at 1_800_000_000
        assert "0:00:00/0:04:50" in text and "at 2027-01-15 08:00:00 UTC" in text
        assert "frame 1/30" in text
        assert "Phase" not in text  # the footer offers no key that would only refuse
        assert "Mute bell" not in text and app.alerter.state() is None  # the past does not ring
        await pilot.press("space")
        await wait_for(pilot, lambda: "PAUSED" in screen_text(app))
        await pilot.press("right_square_bracket")  # +1 min: frame 7 of 30, 20 %
        await wait_for(pilot, lambda: "0:01:00/0:04:50" in screen_text(app))
        text = screen_text(app)
        assert "PAUSED" in text and "frame 7/30" in text and "21%" in text
        assert "━━━━━━" in text and "at 2027-01-15 08:01:00 UTC" in text
        # the bar says paused and where: no toast over the node table says it again
        assert not [t for t in app.toasts if "replay" in t.message], app.toasts
        await pilot.press("9")
        await wait_for(pilot, lambda: "0:04:50/0:04:50" in screen_text(app))
        await pilot.press("space")  # resumed at the end: nothing left to play
        await wait_for(pilot, lambda: "ENDED" in screen_text(app))
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = screen_text(app)
        assert "Pause or resume the replay" in help_text
        assert "Mark the session phase" not in help_text


async def test_replay_bar_fits_80_columns(tmp_path: Path) -> None:
    path, frames = make_recording(tmp_path)
    app = ReplayApp(ReplayFeed.open(path, speed=0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot == frames[0])
        await pilot.press("space")
        await wait_for(pilot, lambda: "PAUSED" in screen_text(app))
        bar = next(line for line in screen_text(app).splitlines() if "PAUSED" in line)
        # the frame it paused on: frame 2 may have come first on a loaded machine (seen
        # with make bench beside the suite); the bar's end, its last cells, must show it
        shown = frames.index(app.latest_snapshot)
        at = dt.datetime(2027, 1, 15, 8, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=10 * shown)
        assert bar.rstrip().endswith(f"frame {shown + 1}/30"), bar
        assert f"at {at:%Y-%m-%d %H:%M:%S} UTC" in bar, bar


def test_replay_bar_look(tmp_path: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    path, frames = make_recording(tmp_path)
    feed = ReplayFeed.open(path, speed=0.5)
    # paused from the start: frame 0, then the seek to frame 6, and nothing in between
    # (a frame slipping in before a key press would change the charts' history)
    feed.pause()
    app = ReplayApp(feed)

    async def pause_at_a_minute(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_for(pilot, lambda: app.latest_snapshot == frames[0])
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: app.latest_snapshot == frames[6])
        app.clear_notifications()  # the seek's toast is not part of the look
        app.frames.news = None  # nor the news line of the verdicts the seek passed
        app.overview.refresh_header()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 30), run_before=pause_at_a_minute)


def test_record_tick_line_says_the_same_budget_words() -> None:
    from infertop.cli.record import tick_line

    frame = FrozenFeed(specs(), ticks=3, budget_usd=2.0).frames[-1]
    assert f"budget {frame.session.budget_label}" in tick_line(frame)
    assert "over by $" in tick_line(frame) and "100%" not in tick_line(frame)


async def test_replay_bar_fits_80_columns_whole(tmp_path: Path) -> None:
    """At 80 columns the bar's "frame n/N" was cut with no mark: the recorded time drops
    its date first, and the line is whole (or ends in "…")."""
    path, frames = make_recording(tmp_path)
    feed = ReplayFeed.open(path, speed=0.5)
    app = ReplayApp(feed)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot == frames[0])
        await pilot.press("space")
        await pilot.pause()
        bar = app.query_one("#replay-bar")
        line = screen_text(app).splitlines()[bar.region.y].rstrip()
        assert re.search(rf"frame \d+/{len(frames)}$", line), line
        assert "PAUSED" in line and "UTC" in line
