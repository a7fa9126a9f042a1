"""The help screen read whole: it scrolls (PgDn) when its keys do not fit the terminal."""

from __future__ import annotations

from infertop.tui.help_screen import HelpScreen
from tests.support.tui_helpers import screen_text


async def whole_help_text(pilot, app) -> str:  # type: ignore[no-untyped-def]
    """Every page of the open help screen, read by its own keys (Home, then PgDn to the end)."""
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    await pilot.press("home")
    await pilot.pause()
    pages = [screen_text(app)]
    while screen.scroll_body.scroll_y < screen.scroll_body.max_scroll_y:
        await pilot.press("pagedown")
        await pilot.pause()
        pages.append(screen_text(app))
    return "\n".join(pages)
