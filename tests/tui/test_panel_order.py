"""The overview's panels stand in the order `tui.panels.PANEL_MODULES` names them,
whichever module was imported first (a replay's look changed with the tests run before)."""

from __future__ import annotations

import pytest

from infertop.tui import panels
from infertop.tui.hunt_panel import HuntPanel
from infertop.tui.session_panel import SessionPanel


def test_panels_stand_in_the_named_order_whatever_registered_first(monkeypatch: pytest.MonkeyPatch) -> None:
    panels.overview_panels()  # every panel module imported, every panel registered
    factories = list(panels._FACTORIES)
    for order in (factories, factories[::-1]):
        monkeypatch.setattr(panels, "_FACTORIES", order)
        built = panels.overview_panels()
        assert [type(p) for p in built] == [SessionPanel, HuntPanel]
