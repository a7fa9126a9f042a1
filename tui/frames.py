"""What the app and its screens share, typed: the newest frame, the pause state, and the
screens that draw frames.

The app owns one `FrameState` and hands it to every `FrameScreen` it makes; a screen reads
the newest frame from it (when it is mounted or comes back on top) and the app calls
`show_snapshot` on the screen on top for every frame, or `refresh_header` while paused.
No screen looks the app up by attribute name.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.screen import Screen

from infertop.monitor.snapshot import Snapshot


@dataclass
class FrameState:
    latest: Snapshot | None = None  # the newest frame received
    paused: bool = False  # drawing is paused (collection and spend go on)
    alerts: str | None = None  # the alert bell: None (off in the layout), "on", "muted"
    # verdicts that just started (tui.announcer), drawn in each screen's header / title
    # line where no figure sits; None: nothing new
    news: Text | None = None


class FrameScreen(Screen[None]):
    """A screen that draws frames. Subclasses override `show_snapshot`."""

    def __init__(self, frames: FrameState, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.frames = frames
        self.snapshot: Snapshot | None = None  # the frame drawn last

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """Draw one frame (the app calls it inside `batch_update()`)."""
        self.snapshot = snapshot

    def with_news(self, title: Text) -> Text:
        """`title` with the news line after it (verdicts that just started): each screen's
        title line tells them, so nothing is drawn over its figures."""
        if self.frames.news is None:
            return title
        out = title.copy()
        out.append("   ")
        out.append_text(self.frames.news)
        return out

    def refresh_header(self) -> None:
        """Redraw what shows the pause state; frames are not drawn while paused."""

    def nodes_in_view(self) -> list[str]:
        """The nodes this screen shows now (a hint the app passes to the feed)."""
        return []

    def show_latest(self) -> None:
        """Draw the newest frame if it is not the one on screen: frames that arrived while
        another screen was on top were not drawn here."""
        latest = self.frames.latest
        if latest is not None and latest is not self.snapshot:
            self.show_snapshot(latest)

    def on_screen_resume(self) -> None:
        self.show_latest()
