"""`[alerts]`: the opt-in terminal bell on new verdicts and budget thresholds, the mute key
and its indicator, the rate limit, and clean layout errors. Bells are counted by a
subclass overriding Textual's public `App.bell()`; the frames are the real Monitor's
with verdicts and budget states set on them, published one by one through Pilot."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import infertop.tui.app
from infertop.layouts.model import AlertsConfig
from infertop.monitor.snapshot import Snapshot, VerdictView
from infertop.tui.app import InfertopApp
from infertop.tui.help_screen import HelpScreen
from tests.support.help_pages import whole_help_text
from tests.support.infertop_cmd import run_infertop
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for

SIZE = (200, 50)


class BellApp(InfertopApp):
    """The real app; only the terminal bell is counted instead of written."""

    CSS_PATH = str(Path(infertop.tui.app.__file__).with_name("app.tcss"))  # relative to the subclass
    bells = 0

    def bell(self) -> None:
        self.bells += 1


def make_app(alerts: AlertsConfig | None) -> tuple[BellApp, Snapshot]:
    feed = FrozenFeed([NodeSpec("decode-01"), NodeSpec("prefill-01", role="prefill")], ticks=1)
    if alerts is not None:
        feed.layout = feed.layout.model_copy(update={"alerts": alerts})
    return BellApp(feed), feed.frames[-1]  # type: ignore[arg-type]


def with_verdicts(base: Snapshot, n: int, *verdicts: tuple[str, str, str, float],
                  budget_alert: str | None = None) -> Snapshot:
    """`base` at tick n with (node, kind, severity, since) verdicts and a budget state."""
    nodes = []
    for node in base.nodes:
        mine = [VerdictView(kind=kind, detail="seen", severity=sev, since=since)  # type: ignore[arg-type]
                for name, kind, sev, since in verdicts if name == node.name]
        nodes.append(node.model_copy(update={"verdicts": mine}))
    session = base.session.model_copy(update={"budget_alert": budget_alert})
    return base.model_copy(update={"nodes": nodes, "session": session, "taken_at": iso(1_800_000_000.0 + n)})


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat()


async def show(app: BellApp, pilot, frame: Snapshot) -> None:  # type: ignore[no-untyped-def]
    app.publish(frame)
    await wait_for(pilot, lambda: app.latest_snapshot is frame)
    await pilot.pause()


CRIT_A = ("decode-01", "straggler", "critical", 1_800_000_000.0)
CRIT_B = ("prefill-01", "link_down", "critical", 1_800_000_001.0)
WARN_C = ("prefill-01", "idle", "warning", 1_800_000_001.0)


async def test_bell_rings_once_for_a_new_critical_verdict_and_is_rate_limited() -> None:
    app, base = make_app(AlertsConfig(bell=True, min_interval_s=60.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await show(app, pilot, with_verdicts(base, 1))
        assert app.bells == 0
        await show(app, pilot, with_verdicts(base, 2, WARN_C))  # below `on = "critical"`
        assert app.bells == 0
        await show(app, pilot, with_verdicts(base, 3, CRIT_A))
        assert app.bells == 1
        await show(app, pilot, with_verdicts(base, 4, CRIT_A))  # still standing: not new
        assert app.bells == 1
        await show(app, pilot, with_verdicts(base, 5, CRIT_A, CRIT_B))  # new, within 60 s
        assert app.bells == 1 and app.alerter.held_back == 1
        assert "bell on" in screen_text(app)


async def test_a_later_verdict_rings_again_after_the_interval() -> None:
    app, base = make_app(AlertsConfig(bell=True, on="warning", min_interval_s=1.0))
    first = with_verdicts(base, 0, CRIT_A)  # standing at the first look
    app.feed.frames = [first]  # type: ignore[attr-defined]
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is first)
        await show(app, pilot, with_verdicts(base, 2, CRIT_A))
        assert app.bells == 0  # what stood when the screen opened is listed, not rung
        await show(app, pilot, with_verdicts(base, 3, CRIT_A, WARN_C))  # a warning rings here
        assert app.bells == 1
        await pilot.pause(1.2)
        await show(app, pilot, with_verdicts(base, 4, CRIT_A, WARN_C, CRIT_B))
        assert app.bells == 2


async def test_muted_never_rings_and_the_header_says_so() -> None:
    app, base = make_app(AlertsConfig(bell=True, min_interval_s=1.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await wait_for(pilot, lambda: "Mute bell" in screen_text(app))  # the footer offers it
        await pilot.press("a")
        await wait_for(pilot, lambda: "BELL MUTED" in screen_text(app))
        await show(app, pilot, with_verdicts(base, 1, CRIT_A))
        await show(app, pilot, with_verdicts(base, 2, CRIT_A, CRIT_B))
        await show(app, pilot, with_verdicts(base, 3, CRIT_A, CRIT_B, budget_alert="80%"))
        assert app.bells == 0
        await pilot.press("a")  # unmuted: what came while muted does not ring now
        await wait_for(pilot, lambda: "BELL MUTED" not in screen_text(app))
        await show(app, pilot, with_verdicts(base, 4, CRIT_A, CRIT_B, budget_alert="80%"))
        assert app.bells == 0
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        assert "Mute / unmute the alert bell" in await whole_help_text(pilot, app)
        await pilot.press("escape")
        assert any(c.title == "Mute / unmute the alert bell" for c in app.get_system_commands(app.screen))


async def test_alerts_off_never_ring_and_offer_no_mute_key() -> None:
    app, base = make_app(None)  # a layout without [alerts]: the bell is opt-in
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await show(app, pilot, with_verdicts(base, 1))
        await show(app, pilot, with_verdicts(base, 2, CRIT_A, budget_alert="100%"))
        await pilot.press("a")
        await pilot.pause()
        text = screen_text(app)
        assert app.bells == 0 and "Mute bell" not in text and "BELL MUTED" not in text
        assert "bell on" not in text


async def test_budget_thresholds_ring_as_they_are_passed() -> None:
    app, base = make_app(AlertsConfig(bell=True, min_interval_s=1.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await show(app, pilot, with_verdicts(base, 1))
        await show(app, pilot, with_verdicts(base, 2, budget_alert="80%"))
        assert app.bells == 1
        await pilot.pause(1.2)
        await show(app, pilot, with_verdicts(base, 3, budget_alert="80%"))  # still 80 %
        assert app.bells == 1
        await show(app, pilot, with_verdicts(base, 4, budget_alert="100%"))
        assert app.bells == 2


async def test_budget_false_leaves_the_budget_silent() -> None:
    app, base = make_app(AlertsConfig(bell=True, budget=False, min_interval_s=1.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.latest_snapshot is not None)
        await show(app, pilot, with_verdicts(base, 1))
        await show(app, pilot, with_verdicts(base, 2, budget_alert="100%"))
        assert app.bells == 0


BAD_ALERTS = """\
[alerts]
bell = "loud"
on = "info"
beep = true

[[nodes]]
name = "n1"
role = "decode"
ssh = "n1"
gpus = 8
"""


def test_bad_alerts_keys_are_clean_layout_errors(tmp_path: Path) -> None:
    layout = tmp_path / "l.toml"
    layout.write_text(BAD_ALERTS)
    (run,) = run_infertop(["snapshot", "--layout", str(layout)])
    assert run.returncode == 2 and "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert lines[0] == f"infertop: {layout}:2: alerts.bell: Input should be a valid boolean, unable to interpret input"
    assert lines[1].startswith(f"infertop: {layout}:3: alerts.on: Input should be 'critical' or 'warning'")
    assert lines[2].startswith(f"infertop: {layout}:4: alerts.beep: unknown field")
