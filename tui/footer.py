"""The footer every screen shows: Textual's, drawn compact under `COMPACT_BELOW` columns
so that more of its keys fit (at 120 columns the full footer was cut to "t Timeli").

Compact, Textual gives every key a right margin, the "^p palette" key docked at the right
edge too: the screen's last column was left to the key list under it, and a stray letter
of a hidden key ("palettel", "palettec") showed there. The palette key here ends at the
edge, its last cell its own padding."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

COMPACT_BELOW = 130


class FitFooter(Footer):
    DEFAULT_CSS = """
    FitFooter.-compact FooterKey.-command-palette {
        margin-right: 0;
        padding-right: 1;
    }
    """

    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < COMPACT_BELOW
