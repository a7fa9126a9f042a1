"""The Textual app: receives `Snapshot`s from a feed and shows them. No I/O of its own.

The feed publishes frames with `InfertopApp.publish` (thread-safe); each becomes a
`SnapshotArrived` message, and a queued burst collapses to the newest. Every frame is
recorded into the app's own bounded `History` (for sparklines) and, unless rendering is
paused, drawn on the current screen inside one `batch_update()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from functools import partial

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES
from textual.widget import Widget

from infertop.collectors.process.gc_pacing import PacedCollector
from infertop.collectors.process.stopping import SIGNALS, arm_watchdog, run_bounded
from infertop.monitor.evaluation.phases import PHASES
from infertop.monitor.feeds import EndingFeed, InterestFeed, PhaseMarkingFeed, SnapshotFeed, can_mark_phase
from infertop.monitor.format import inert_text
from infertop.monitor.snapshot import Snapshot, TimelineEventView
from infertop.tui.alerts import Alerter, AlertSettings
from infertop.tui.announcer import VerdictAnnouncer
from infertop.tui.columns import SORTS, SortSpec
from infertop.tui.evidence_screen import EvidenceScreen
from infertop.tui.fleet_map import FleetMap
from infertop.tui.frames import FrameScreen, FrameState
from infertop.tui.help_screen import HelpScreen
from infertop.tui.history import History
from infertop.tui.hunt_list import HuntList
from infertop.tui.messages import OpenNode, SnapshotArrived
from infertop.tui.node_screen import NodeScreen
from infertop.tui.node_table import NodeTable
from infertop.tui.overview import OverviewScreen
from infertop.tui.scoreboard_screen import ScoreboardScreen
from infertop.tui.sections import SECTION_BINDINGS
from infertop.tui.timeline_screen import EventChosen, TimelineScreen

log = logging.getLogger(__name__)
FEED_STOP_TIMEOUT_S = 1.5  # quitting (q, SIGINT, SIGTERM) takes 2 s at most
# the tables' own keys (RowTable's bindings), said once in the help
TABLE_KEYS = [Binding("up,down,pageup,pagedown,home,end", "noop", "Move",
                      key_display="↑ ↓ PgUp PgDn Home End",
                      tooltip="Move the cursor (a row, a page, the first, the last)")]


class InfertopApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "infertop"
    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="Quit infertop"),
        Binding("question_mark", "help", "Help", tooltip="This list of keys"),
        # one key, said as what it will do: "p Pause", and "p Resume" while paused
        Binding("p", "pause", "Pause", tooltip="Pause rendering (collection and spend go on)"),
        Binding("p", "resume", "Resume", tooltip="Resume rendering (paused: the screen is frozen)"),
        Binding("m", "pick_phase", "Phase",
                tooltip="Mark the session phase (build, load, warmup, run, failed, idle)"),
        Binding("b", "scoreboard", "Scoreboard",
                tooltip="Scoreboard: live point vs the chart, latency, cache"),
        Binding("a", "toggle_alerts", "Mute bell",
                tooltip="Mute / unmute the alert bell ([alerts] bell = true in the layout)"),
        Binding("t", "timeline", "Timeline",
                tooltip="Restarts, health, settings, verdicts, phases in time order"),
    ]

    def __init__(
        self, feed: SnapshotFeed, history_length: int = 60, panels: list[Widget] | None = None,
        alerts: AlertSettings | None = None,
    ) -> None:
        """`panels`: overview plug-in panels; None = every registered one (see `tui.panels`).
        `alerts`: the bell's settings; None = the feed's layout's `[alerts]`."""
        super().__init__()
        self.feed = feed
        self.history = History(history_length)
        # fed every frame, whatever screen is on top: a verdict that starts while the
        # operator reads a node screen is still announced at once
        self.verdict_announcer = VerdictAnnouncer()
        self.alerter = Alerter(alerts if alerts is not None else feed.layout.alerts)
        self.frames = FrameState(alerts=self.alerter.state())
        self.frames_received = 0
        self.frames_rendered = 0
        self.overview = OverviewScreen(self.frames, panels)
        self._feed_running = False
        # garbage collected between frames, not while one is drawn (collectors.process.gc_pacing)
        self.collector = PacedCollector()
        # frames replaced by a newer one, let go once that one is on screen: freeing a
        # frame of 128 nodes (~20k objects) took 3-5 ms from drawing the next
        self._retired: list[Snapshot] = []
        self._in_view: list[str] = []  # the nodes last told to the feed as shown

    @property
    def latest_snapshot(self) -> Snapshot | None:
        return self.frames.latest

    @property
    def paused(self) -> bool:
        return self.frames.paused

    def get_default_screen(self) -> Screen[None]:
        return self.overview

    # -- the feed -------------------------------------------------------------------

    def on_mount(self) -> None:
        # SIGINT / SIGTERM quit like `q` does (the terminal restored, the record closed);
        # the watchdog ends the process if that is not done within 2 s
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal, sig)
        self.collector.install()

    def _on_signal(self, signum: int) -> None:
        if self.return_code is None:
            arm_watchdog(128 + signum)
            self.exit(128 + signum)

    async def on_ready(self) -> None:
        # Ready comes once the overview and its panels exist: no frame can reach a widget
        # that has not composed yet
        await self.feed.start(self.publish)
        self._feed_running = True
        if isinstance(self.feed, EndingFeed):
            self.run_worker(self._leave_when_feed_ends(self.feed), name="feed-end", exit_on_error=False)

    async def _leave_when_feed_ends(self, feed: EndingFeed) -> None:
        # a monitor in another process stopped: its last frame must not stay up as live
        await feed.ended()
        self.exit()

    async def on_unmount(self) -> None:
        self.collector.uninstall()
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if self._feed_running:
            self._feed_running = False
            with contextlib.suppress(Exception):
                async with asyncio.timeout(FEED_STOP_TIMEOUT_S):
                    await self.feed.stop()

    def publish(self, snapshot: Snapshot) -> None:
        """Hand a frame to the app. Safe from any thread; never blocks the caller."""
        self.post_message(SnapshotArrived(snapshot))

    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        snapshot = message.snapshot
        self.frames_received += 1
        if self.frames.latest is not None and not self.paused:
            self._retired.append(self.frames.latest)
        self.frames.latest = snapshot
        self.history.record(snapshot)
        self.verdict_announcer.observe(snapshot.nodes, snapshot.verdict_groups)
        self.frames.news = self.verdict_announcer.line()
        self.alerter.observe(self, snapshot)  # rings while rendering is paused too
        if self.paused:
            self._refresh_headers()
            return
        self.render_snapshot(snapshot)

    def render_snapshot(self, snapshot: Snapshot) -> None:
        screen = self._shown_screen()
        if isinstance(screen, FrameScreen):
            with self.batch_update():
                screen.show_snapshot(snapshot)
            self.frames_rendered += 1
        self.call_after_refresh(self._after_frame)

    def _after_frame(self) -> None:
        self._retired.clear()
        self.collector.after_frame()
        screen = self._shown_screen()
        if isinstance(self.feed, InterestFeed) and isinstance(screen, FrameScreen):
            in_view = screen.nodes_in_view()
            if in_view != self._in_view:  # a hint passed down: the viewer reads nothing itself
                self._in_view = in_view
                self.feed.show_interest(in_view)

    def _refresh_headers(self) -> None:
        screen = self._shown_screen()
        if isinstance(screen, FrameScreen):
            screen.refresh_header()

    def _shown_screen(self) -> Screen[object] | None:
        """The screen on top; None once the app has closed its screens (a frame the feed
        sent as the app was closing still arrives: seen with the suite beside make bench)."""
        try:
            return self.screen
        except ScreenStackError:
            return None

    # -- actions --------------------------------------------------------------------

    def action_toggle_pause(self) -> None:
        self.frames.paused = not self.frames.paused
        if not self.paused and self.latest_snapshot is not None:
            self.render_snapshot(self.latest_snapshot)
        self._refresh_headers()
        self.refresh_bindings()  # the footer says "Resume" while paused

    def action_pause(self) -> None:
        if not self.paused:
            self.action_toggle_pause()

    def action_resume(self) -> None:
        if self.paused:
            self.action_toggle_pause()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # a key that would only refuse is not offered: hidden from the footer and help
        if action == "pick_phase" and not can_mark_phase(self.feed):
            return False
        if action == "toggle_alerts" and not self.alerter.active:
            return False
        if action in ("pause", "resume"):
            return self.paused == (action == "resume")
        return True

    def offered(self, bindings: Iterable[BindingType]) -> list[BindingType]:
        """`bindings` less those whose action `check_action` turns off for this feed."""
        return [b for b in bindings
                if not isinstance(b, Binding) or self.check_action(b.action, ()) is not False]

    def action_toggle_alerts(self) -> None:
        muted = self.alerter.toggle_mute()
        self.frames.alerts = self.alerter.state()
        self.notify("alert bell muted" if muted else "alert bell on", timeout=2)
        self._refresh_headers()

    def help_scopes(self, screen: Screen[object] | None = None) -> list[tuple[str, Iterable[BindingType]]]:
        """Every key, by where it works: the keys of `screen` (the one `?` was pressed on)
        first, then those that work everywhere, then the other screens'."""
        def own(bindings: Iterable[BindingType]) -> list[BindingType]:
            # another screen's keys less the paging keys every long screen shares (listed once)
            return [b for b in bindings if b not in SECTION_BINDINGS]

        screens: list[tuple[type, list[tuple[str, Iterable[BindingType]]]]] = [
            (OverviewScreen, [("overview", OverviewScreen.BINDINGS), ("node table", NodeTable.BINDINGS),
                              ("hunt list", HuntList.BINDINGS), ("tables", TABLE_KEYS),
                              ("fleet map", FleetMap.BINDINGS)]),
            (NodeScreen, [("node screen", NodeScreen.BINDINGS)]),
            (ScoreboardScreen, [("scoreboard", ScoreboardScreen.BINDINGS)]),
            (TimelineScreen, [("timeline", TimelineScreen.BINDINGS)]),
            (EvidenceScreen, [("evidence", EvidenceScreen.BINDINGS)]),
        ]
        here = [scope for kind, scopes in screens if isinstance(screen, kind) for scope in scopes]
        others = [(name, own(b)) for kind, scopes in screens if not isinstance(screen, kind)
                  for name, b in scopes]
        paging = [] if any(b in SECTION_BINDINGS for _, bs in here for b in bs) else [
            ("long screens", SECTION_BINDINGS)]
        everywhere = ("everywhere", self.offered(InfertopApp.BINDINGS))
        return [*here, everywhere, *others, *paging]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_scopes(self.screen), self.COMMAND_PALETTE_BINDING))

    def action_scoreboard(self) -> None:
        if isinstance(self.screen, ScoreboardScreen):
            return
        if isinstance(self.screen, NodeScreen):
            self.pop_screen()
        self.push_screen(ScoreboardScreen(self.history, self.frames))

    def action_timeline(self) -> None:
        if isinstance(self.screen, TimelineScreen):
            return
        if isinstance(self.screen, NodeScreen | ScoreboardScreen):
            self.pop_screen()
        self.push_screen(TimelineScreen(self.frames))

    def on_event_chosen(self, message: EventChosen) -> None:
        self.go_to_event(message.event)

    def go_to_event(self, event: TimelineEventView) -> None:
        """Live: the event's node opens (the past cannot be shown). A replay seeks."""
        if event.node is not None:
            self.open_node(event.node)

    def on_open_node(self, message: OpenNode) -> None:
        self.open_node(message.node)

    def open_node(self, node: str) -> None:
        current = self.screen
        if isinstance(current, NodeScreen):
            if current.node == node:
                return
            self.pop_screen()
        if self.screen is self.overview:
            self.overview.back_to_table = True
        self.push_screen(NodeScreen(node, self.history, self.frames))

    def _on_overview(self, action: Callable[[], None]) -> None:
        """Run an overview action from anywhere: back to the overview first."""
        while len(self.screen_stack) > 1 and self.screen is not self.overview:
            self.pop_screen()
        action()

    def set_sort(self, spec: SortSpec) -> None:
        self._on_overview(partial(self.overview.set_sort, spec))

    def action_pick_phase(self) -> None:
        if not can_mark_phase(self.feed):
            self.notify("a recording's phases cannot be changed", severity="warning")
            return
        from infertop.tui.session_panel import PhasePicker

        current = self.latest_snapshot.session.phase if self.latest_snapshot else None
        self.push_screen(PhasePicker(current), lambda phase: self.mark_phase(phase) if phase else None)

    def mark_phase(self, phase: str) -> None:
        if isinstance(self.feed, PhaseMarkingFeed):
            self.feed.mark_phase(phase)
            self.notify(f"phase: {phase} (spend from now on counts to it)")

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # Textual's own "Keys" panel, less what our "Help: keys" (?) says: one is enough
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")
        yield SystemCommand("Filter nodes", "Filter the node table (/)",
                            partial(self._on_overview, self.overview.action_start_filter))
        yield SystemCommand("Clear filter", "Show every node again",
                            partial(self._on_overview, self.overview.action_clear_filter))
        yield SystemCommand("Next sort column", "Sort the node table by the next column (>)",
                            partial(self._on_overview, self.overview.action_sort_next))
        yield SystemCommand("Reverse sort", "Reverse the node table's sort (r)",
                            partial(self._on_overview, self.overview.action_sort_reverse))
        for spec in SORTS:
            yield SystemCommand(f"Sort by {spec.label}", "Sort the node table, worst first",
                                partial(self.set_sort, spec), discover=False)
        yield SystemCommand("Fleet map / node table", "A cell per node, grouped; or one row per node (f)",
                            partial(self._on_overview, self.overview.action_toggle_map))
        yield SystemCommand("Pause / resume rendering", "Freeze the screen; collection goes on (p)",
                            self.action_toggle_pause)
        yield SystemCommand("Help: keys", "Every key binding (?)", self.action_help)
        yield SystemCommand("Scoreboard", "Live point vs the reference chart, latency, cache (b)",
                            self.action_scoreboard)
        if self.alerter.active:
            yield SystemCommand("Mute / unmute the alert bell", "[alerts] bell in the layout (a)",
                                self.action_toggle_alerts)
        if self.latest_snapshot is not None:
            for node in self.latest_snapshot.nodes:
                yield SystemCommand(f"Open node {inert_text(node.name, 60)}", f"{node.role}, {node.status}",
                                    partial(self.open_node, node.name), discover=False)
        stop_monitor = getattr(self.feed, "stop_monitor", None)
        if callable(stop_monitor):  # a monitor in a process of its own outlives `q`
            yield SystemCommand("Quit and stop the monitor", "Leave, and end the monitor and its record",
                                partial(self._quit_and_stop, stop_monitor))
        if can_mark_phase(self.feed):
            for phase in PHASES:
                yield SystemCommand(f"Mark phase: {phase}", "Attribute spend from now on to this phase",
                                    partial(self.mark_phase, phase), discover=False)

    def _quit_and_stop(self, stop_monitor: Callable[[], None]) -> None:
        stop_monitor()
        self.exit()


def theme_names() -> list[str]:
    """The colour themes `theme` may name (Textual's built-in ones)."""
    return sorted(BUILTIN_THEMES)


def run_feed(feed: SnapshotFeed, theme: str | None = None) -> int:
    """Run the TUI on any feed (live, replay, demo) until the user quits. Returns an exit code.
    `theme`: one of `theme_names()` (the user's config), else Textual's default."""
    app = InfertopApp(feed)
    if theme is not None:
        app.theme = theme
    run_bounded(app.run_async())  # not app.run(): its asyncio.run joins stuck worker threads
    return app.return_code or 0
