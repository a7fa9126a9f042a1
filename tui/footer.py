"""The footer every screen shows: Textual's, drawn compact under `COMPACT_BELOW` columns
so that more of its keys fit (at 120 columns the full footer was cut to "t Timeli")."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

COMPACT_BELOW = 130


class FitFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < COMPACT_BELOW
