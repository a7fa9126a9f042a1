"""`t`: the timeline — restarts, health flips, setting changes, preemption bursts, verdict
onsets and clears, phase marks, one time-ordered list for the cluster (newest last).
Enter on an event: on a recording, the replay moves to the moment it happened; live, its
node opens. Esc goes back."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from infertop.monitor.snapshot import Snapshot, TimelineEventView
from infertop.tui.footer import FitFooter
from infertop.tui.frames import FrameScreen, FrameState
from infertop.tui.timeline_text import event_line


class EventChosen(Message):
    """The operator picked an event (the app seeks a replay to it or opens its node)."""

    def __init__(self, event: TimelineEventView) -> None:
        super().__init__()
        self.event = event


class TimelineScreen(FrameScreen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the overview"),
        Binding("enter", "choose", "Go to event",
                tooltip="Replay: seek to when it happened; live: open its node"),
        # the list's own keys, said here so that the help lists them
        Binding("up,down,pageup,pagedown,home,end", "noop", "Move", show=False,
                key_display="↑ ↓ PgUp PgDn Home End",
                tooltip="Move through the events (↑ ↓ PgUp PgDn Home End)"),
        Binding("j", "move(1)", "Down", show=False, tooltip="The next event"),
        Binding("k", "move(-1)", "Up", show=False, tooltip="The previous event"),
    ]

    def __init__(self, frames: FrameState) -> None:
        super().__init__(frames, classes="timeline-screen")
        self.events: list[TimelineEventView] = []

    def compose(self) -> ComposeResult:
        self.title_bar = Static(Text("TIMELINE (oldest first)", "bold"), id="timeline-title")
        self._title_shown: Text | None = None
        self.event_list = OptionList(id="timeline-events")
        yield self.title_bar
        yield self.event_list
        yield FitFooter()

    def on_mount(self) -> None:
        self.event_list.focus()
        self.show_latest()

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        title = self.with_news(Text("TIMELINE (oldest first)", "bold"))
        if title != self._title_shown:
            self._title_shown = title
            self.title_bar.update(title)
        events = list(snapshot.timeline)
        if events == self.events:
            return
        following = self.event_list.highlighted is None or self.event_list.highlighted >= len(self.events) - 1
        self.events = events
        highlighted = self.event_list.highlighted
        self.event_list.clear_options()
        if not events:
            self.event_list.add_option(Option(Text("nothing has happened yet", "grey50"), disabled=True))
            return
        self.event_list.add_options([Option(event_line(e)) for e in events])
        # newest on the cursor unless the operator moved it up to read
        self.event_list.highlighted = len(events) - 1 if following or highlighted is None else min(
            highlighted, len(events) - 1)

    def action_move(self, step: int) -> None:
        self.event_list.action_cursor_down() if step > 0 else self.event_list.action_cursor_up()

    def action_noop(self) -> None:
        """The list handles these keys itself (it has the focus)."""

    def action_choose(self) -> None:
        index = self.event_list.highlighted
        if index is not None and 0 <= index < len(self.events):
            self.post_message(EventChosen(self.events[index]))

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        message.stop()
        if 0 <= message.option_index < len(self.events):
            self.post_message(EventChosen(self.events[message.option_index]))
