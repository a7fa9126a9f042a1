"""The session panel's spend charts: the rate ($/h between frames, not the cumulative spend
that drew as a solid bar) and spend vs budget with the projection, phase and verdict
marks — from frames of the real Monitor with a known spend series, through Pilot."""

from __future__ import annotations

import datetime as dt

from infertop.monitor.snapshot import Snapshot, VerdictView
from infertop.tui.app import InfertopApp
from infertop.tui.history import SpendHistory
from infertop.tui.session_panel import SessionPanel
from infertop.tui.spend_chart import NOW_GLYPH, PROJECTION_GLYPHS, budget_lines, rate_lines
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for

START = 1_800_000_000.0  # the first frame; the reservation began 3 h before
STEP_S = 10.0


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat()


def spend_frames(n: int = 40, projection: bool = True) -> list[Snapshot]:
    """$36/h for 20 frames then $72/h; phase load, then run from frame 25; a critical
    verdict that started at frame 30 is seen from frame 32 on. Budget $400; with
    `projection`, the reservation ends 5 h after the first frame."""
    base = FrozenFeed([NodeSpec("decode-01")], ticks=2).frames[-1]
    frames, spend = [], 100.0
    for i in range(n):
        rate = 36.0 if i < 20 else 72.0
        if i:
            spend += rate * STEP_S / 3600
        node = base.nodes[0]
        if i >= 32:
            verdict = VerdictView(kind="straggler", detail="slow", severity="critical", since=START + 300)
            node = node.model_copy(update={"verdicts": [verdict]})
        session = base.session.model_copy(update={
            "spend_usd": spend, "cost_per_hour_usd": rate, "phase": "load" if i < 25 else "run",
            "started_at": iso(START - 3 * 3600), "budget_usd": 400.0,
            "budget_used_fraction": spend / 400.0, "budget_label": f"{spend / 400.0:.0%} of $400",
            "reservation_end": iso(START + 5 * 3600) if projection else None,
            "projected_spend_usd": spend + rate * (5 * 3600 - i * STEP_S) / 3600 if projection else None,
        })
        frames.append(base.model_copy(update={
            "session": session, "nodes": [node], "taken_at": iso(START + i * STEP_S)}))
    return frames


def test_rate_chart_draws_the_rate_not_the_cumulative_spend() -> None:
    history = SpendHistory()
    for frame in spend_frames():
        history.record(frame)
    rates = [r for r in history.rate_usd_per_h if r is not None]
    assert rates[0] == rates[18] and abs(rates[0] - 36.0) < 1e-6 and abs(rates[-1] - 72.0) < 1e-6
    line, marks = rate_lines(history, 60)
    bars = line.plain[7:67]
    # 20 blank columns, the first frame (no rate yet), 19 at half height, 20 full
    assert bars == " " * 21 + "▄" * 19 + "█" * 20
    assert "$0–$72.00/h" in line.plain and "now $72.00/h" in line.plain
    # the phase turned to run at frame 25 (column 45), the verdict started at frame 30
    assert marks.plain[7 + 45] == "r" and marks.plain[7 + 50] == "!"


def test_budget_chart_marks_the_projection_and_the_budget() -> None:
    history = SpendHistory()
    frames = spend_frames()
    for frame in frames:
        history.record(frame)
    rows = [line.plain for line in budget_lines(frames[-1].session, history, 64, rows=2)]
    assert len(rows) == 3
    chart, axis = [row[:7 + 64] for row in rows[:2]], rows[2]
    # 3 h done of 8: columns past 24 are the projection, a braille line rising to the
    # snapshot's projected spend; the budget is a ─ line where nothing else is drawn
    assert all(c in PROJECTION_GLYPHS or c == " " or c == "─" for row in chart for c in row[7 + 25:])
    assert sum(c in PROJECTION_GLYPHS for row in chart for c in row[7:]) >= 38
    assert "─" in chart[0] and not any(c in PROJECTION_GLYPHS for row in chart for c in row[7:7 + 24])
    last = frames[-1].session
    assert rows[1].endswith(f"projected ${last.projected_spend_usd:,.2f}")  # to the reservation end
    assert rows[0].endswith("budget $400.00") and "05:00→13:00 UTC" in axis
    assert "!" in axis[7:]  # the verdict start, where `since` puts it (the now column)
    assert rows[0].startswith("$") and rows[1].startswith("$0")


def test_without_a_reservation_end_the_projection_runs_at_the_current_rate() -> None:
    history = SpendHistory()
    frames = spend_frames(projection=False)
    for frame in frames:
        history.record(frame)
    legend = "\n".join(line.plain for line in budget_lines(frames[-1].session, history, 64))
    last = frames[-1].session
    assert last.spend_usd is not None
    # a third of the session past now, at $72/h: 3h06m30s ÷ 3 × $72/h on top of the spend
    expected = last.spend_usd + 72.0 * (3 * 3600 + 390) / 3 / 3600
    assert f"projected ${expected:,.2f}" in legend and "(now's $/h)" in legend and "05:00→09:08 UTC" in legend


def test_seeking_back_starts_the_history_again() -> None:
    history = SpendHistory()
    frames = spend_frames(10)
    for frame in frames:
        history.record(frame)
    history.record(frames[3])  # a replay sought back
    assert list(history.times) == [START + 3 * STEP_S]
    assert list(history.rate_usd_per_h) == [None]


async def test_session_panel_draws_the_spend_charts() -> None:
    frames = spend_frames()
    feed = FrozenFeed([NodeSpec("decode-01")], ticks=0)  # no frames of its own
    app = InfertopApp(feed)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        panel = app.overview.query_one(SessionPanel)
        for frame in frames:  # one by one: a burst would collapse to the newest
            app.publish(frame)
            await wait_for(pilot, lambda frame=frame: panel.last_taken_at == frame.taken_at)  # type: ignore[misc]
        await pilot.pause()
        body = screen_text(app)
        rate_row = next(line for line in body.splitlines() if "$0–$72.00/h" in line)
        assert "▄" in rate_row and "█" in rate_row and "$0–$72.00/h" in rate_row
        assert any(c in PROJECTION_GLYPHS for c in body) and NOW_GLYPH in body
        assert "projected $" in body and "05:00→13:00 UTC" in body


def test_session_panel_look(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """The charts as drawn, frozen (the session panel alone, so other panels do not churn it)."""
    frames = spend_frames()
    panel = SessionPanel()
    app = InfertopApp(FrozenFeed([NodeSpec("decode-01")], ticks=0), panels=[panel])  # type: ignore[arg-type]

    async def publish_all(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_for(pilot, lambda: panel.is_mounted)
        for frame in frames:
            app.publish(frame)
            await wait_for(pilot, lambda frame=frame: panel.last_taken_at == frame.taken_at)  # type: ignore[misc]
        app.frames.news = None  # the verdict's news line is not part of the look
        app.overview.refresh_header()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(140, 50), run_before=publish_all)


def test_charts_draw_whatever_figures_arrive() -> None:
    """Extreme or broken figures (bounded upstream) draw something and never raise."""
    frames = spend_frames(5)
    odd = [1e308, -1e308, float("nan"), float("inf"), 0.0, None]
    for i, value in enumerate(odd):
        history = SpendHistory()
        for n, frame in enumerate(frames):
            session = frame.session.model_copy(update={
                "spend_usd": value if n == 3 else frame.session.spend_usd, "cost_per_hour_usd": value,
                "projected_spend_usd": value, "budget_usd": odd[(i + 1) % len(odd)],
                "started_at": iso(START + 3600) if i % 2 else frame.session.started_at,  # after now
            })
            history.record(frame.model_copy(update={"session": session}))
        lines = [*rate_lines(history, 30), *budget_lines(session, history, 30)]
        assert all(isinstance(line.plain, str) for line in lines)


def test_the_axis_label_is_never_cut() -> None:
    """The chart's top label sits in a 6-character gutter: "$30,524" was shown as
    "$30,52" (a newcomer read thirty dollars)."""
    from infertop.monitor.format import fmt_usd_short

    cases = {0.5: "$0.50", 9.994: "$9.99", 72.0: "$72", 9_999.0: "$9,999", 30_524.0: "$30.5k",
             99_960.0: "$100k", 305_210.0: "$305k", 1_234_567.0: "$1.2M", 99_960_000.0: "$100M",
             2.5e9: "$2.5B"}
    for value, label in cases.items():
        assert fmt_usd_short(value) == label, value
        assert len(fmt_usd_short(value)) <= 6
    history = SpendHistory()
    frames = spend_frames()
    big = [f.model_copy(update={"session": f.session.model_copy(update={
        "spend_usd": (f.session.spend_usd or 0) * 300, "budget_usd": None, "budget_used_fraction": None,
        "budget_label": None})}) for f in frames]
    for frame in big:
        history.record(frame)
    top_row = budget_lines(big[-1].session, history, 64, rows=2)[0].plain
    gutter = top_row[:7].strip()
    assert gutter.startswith("$") and gutter[-1] in "kM", top_row[:12]
