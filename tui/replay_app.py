"""The TUI on a recording: the live app plus pause and seek keys for a `ReplayFeed`."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding, BindingType

from monitor.record.replay import ReplayFeed
from tui.app import InfertopApp


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
        super().__init__(feed, history_length)
        self.replay = feed
        self.sub_title = feed.status()

    def _replay_moved(self) -> None:
        self.sub_title = self.replay.status()
        self.notify(self.replay.status(), timeout=2)

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

    def help_scopes(self) -> list[tuple[str, Iterable[BindingType]]]:
        return [("replay", ReplayApp.BINDINGS), *super().help_scopes()]


def run_replay(feed: ReplayFeed) -> int:
    app = ReplayApp(feed)
    app.run()
    return app.return_code or 0
