"""The TUI on a recording: the live app plus pause and seek keys for a `ReplayFeed`, and a
position bar (elapsed / total, progress, the recorded time, PLAYING / PAUSED / ENDED).

Only the keys that work are offered: a recording's phases cannot be marked, so `m` is
neither in the footer nor in the help (`InfertopApp.check_action`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from infertop.monitor.format import fmt_duration, fmt_exact, fmt_pct
from infertop.monitor.record.replay import ReplayFeed
from infertop.monitor.snapshot import TimelineEventView
from infertop.tui.alerts import AlertsOff
from infertop.tui.app import InfertopApp
from infertop.tui.messages import SnapshotArrived
from infertop.tui.timeline_text import clock

MAX_EVENT_NOTES = 3  # events announced per frame; the timeline screen (t) lists them all

BAR_WIDTH = 30


def progress_bar(fraction: float, width: int = BAR_WIDTH) -> Text:
    """━ for what was played, ─ for what is left."""
    done = max(0, min(width, round(max(0.0, min(1.0, fraction)) * width)))
    return Text("━" * done, style="cyan") + Text("─" * (width - done), style="grey50")


def replay_bar_text(feed: ReplayFeed, width: int = BAR_WIDTH, dated: bool = True) -> Text:
    """One line: state, elapsed / total, progress bar, recorded time (its date left out
    where `dated` is false: a narrow terminal), frame n/N."""
    ticks = feed.recording.ticks
    first, last = ticks[0].at, ticks[-1].at
    if feed.paused:
        state = Text(" ⏸ PAUSED ", style="reverse bold yellow")
    elif feed.index >= len(ticks):
        state = Text(" ■ ENDED ", style="reverse grey70")
    else:
        state = Text(f" ▶ PLAYING ×{fmt_exact(feed.speed)} ", style="bold green")
    clock = "%Y-%m-%d %H:%M:%S UTC" if dated else "%H:%M:%S UTC"
    recorded = datetime.fromtimestamp(feed.position_at, UTC).strftime(clock)
    unreadable = len(feed.recording.unreadable_snapshots)
    return Text.assemble(
        state,
        f" {fmt_duration(feed.position_at - first)}/{fmt_duration(last - first)} ",
        progress_bar(feed.progress(), width),
        f" {fmt_pct(feed.progress())}",
        ("  at ", "grey70"), recorded,
        ("  frame ", "grey70"), f"{max(feed.index, 1)}/{len(ticks)}",
        (f"  {unreadable} unreadable", "yellow") if unreadable else "",
    )


class ReplayBar(Static):
    DEFAULT_CSS = """
    ReplayBar { height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, feed: ReplayFeed) -> None:
        super().__init__(id="replay-bar")
        self.feed = feed

    def on_resize(self) -> None:
        self.show()

    def show(self) -> None:
        # the progress bar takes what the rest of the line leaves (6 to 40 cells); where
        # that is too little the recorded time goes without its date, and only then is
        # the line cut, with "…" (at 80 columns "frame n/N" was cut with no mark)
        width = self.size.width or 78  # the content width (padding excluded)
        for dated in (True, False):
            room = width - replay_bar_text(self.feed, 0, dated).cell_len - 1
            if room >= 6 or not dated:
                break
        text = replay_bar_text(self.feed, max(6, min(40, room)), dated)
        text.no_wrap, text.overflow = True, "ellipsis"
        self.update(text)


class ReplayApp(InfertopApp):
    BINDINGS = [
        Binding("space", "toggle_replay", "Play/pause", tooltip="Pause or resume the replay"),
        Binding("left_square_bracket", "seek(-60)", "-1 min", tooltip="Back one minute"),
        Binding("right_square_bracket", "seek(60)", "+1 min", tooltip="Forward one minute"),
        Binding("left_curly_bracket", "seek(-600)", "-10 min", show=False, tooltip="Back ten minutes"),
        Binding("right_curly_bracket", "seek(600)", "+10 min", show=False, tooltip="Forward ten minutes"),
        Binding("0", "seek_start", "Start", show=False, tooltip="Back to the first frame"),
        Binding("9", "seek_end", "End", show=False, tooltip="The last frame"),
    ]

    def __init__(self, feed: ReplayFeed, history_length: int = 60) -> None:
        # the past does not ring: a replay's alerts are off whatever its layout says
        super().__init__(feed, history_length, alerts=AlertsOff())
        self.replay = feed
        self.sub_title = feed.status()
        self.replay_bar = ReplayBar(feed)
        # recorded time up to which the timeline's events were announced
        self._announced_until: float | None = None
        self.announced: list[TimelineEventView] = []  # every event announced, in order

    # Textual runs the handlers of every class in the MRO, this one first: no super() calls
    async def on_ready(self) -> None:
        # under the header, mounted before the feed starts: at the top it stays on screen
        # when a short terminal pushes the overview's lower parts under the footer
        await self.overview.mount(self.replay_bar, after=self.overview.header_bar)
        self.replay_bar.show()

    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        self._show_position()
        self._announce_events(message.snapshot.timeline)

    def _announce_events(self, events: list[TimelineEventView]) -> None:
        """The timeline drawn as it happened: each event the frame brings that happened
        since the frame before (played forward, not jumped to) is announced at its moment."""
        now = self.replay.position_at
        since, self._announced_until = self._announced_until, now
        if since is None or now < since:
            return  # the first frame, or a seek back: the past is on the timeline screen
        new = [e for e in events if since < e.at <= now]
        self.announced += new
        del self.announced[:-1000]
        for event in new[-MAX_EVENT_NOTES:]:
            node = f" {event.node}" if event.node else ""
            self.notify(f"{clock(event.at)} {event.kind}{node}: {event.detail}", timeout=4,
                        severity="warning" if event.kind in ("restart", "health") else "information",
                        markup=False)

    def go_to_event(self, event: TimelineEventView) -> None:
        """Seek to the moment the event happened, and stay there (paused)."""
        self.replay.pause()
        self.replay.seek_to(event.at)
        self._announced_until = None
        self._replay_moved()

    def _show_position(self) -> None:
        self.sub_title = self.replay.status()
        if self.replay_bar.is_mounted:
            self.replay_bar.show()

    def _replay_moved(self) -> None:
        # said by the replay bar (PAUSED / PLAYING, the position), not by a toast over the
        # node table: a toast covered the table's right half for two seconds (issue 47)
        self._show_position()

    def action_toggle_replay(self) -> None:
        self.replay.toggle_pause()
        self._replay_moved()

    def action_seek(self, delta_s: float) -> None:
        self.replay.seek(float(delta_s))
        self._replay_moved()

    def action_seek_start(self) -> None:
        self.replay.seek_index(0)
        self._replay_moved()

    def action_seek_end(self) -> None:
        self.replay.seek_index(len(self.replay.recording.ticks) - 1)
        self._replay_moved()

    def help_scopes(self, screen: Screen[object] | None = None) -> list[tuple[str, Iterable[BindingType]]]:
        return [("replay", ReplayApp.BINDINGS), *super().help_scopes(screen)]


def run_replay(feed: ReplayFeed) -> int:
    app = ReplayApp(feed)
    app.run()
    return app.return_code or 0
