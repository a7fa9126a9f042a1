"""Extra overview panels (session / spend, alerts & hunt list, …) plug in here.

A panel is a Textual widget with a `show_snapshot(snapshot)` method, built by a
zero-argument factory registered with `register_panel`. The overview mounts every
registered panel in its panel row (between the roll-ups and the node table) and hands
each one every rendered snapshot, inside the same batch update as the table.

A panel module lives in `tui/` and registers itself on import; the overview imports the
modules named in `PANEL_MODULES` when they exist, so adding a panel is one new file plus
its name there. A panel that wants a node opened posts `tui.messages.OpenNode(name)`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from textual.widget import Widget

from infertop.monitor.snapshot import Snapshot


@runtime_checkable
class SnapshotPanel(Protocol):
    def show_snapshot(self, snapshot: Snapshot) -> None: ...


@runtime_checkable
class GrowingPanel(Protocol):
    """A panel that asks for more lines than the panels' usual share (the hunt list: every
    verdict); the overview grants what the node table can spare (`overview.panel_lines`)."""

    def lines_wanted(self) -> int: ...

    def fit_in(self, lines: int) -> None: ...


PanelFactory = Callable[[], Widget]
PANEL_MODULES: tuple[str, ...] = ("infertop.tui.session_panel", "infertop.tui.hunt_panel")
_FACTORIES: list[PanelFactory] = []


def register_panel(factory: PanelFactory) -> PanelFactory:
    if factory not in _FACTORIES:
        _FACTORIES.append(factory)
    return factory


def _import_panel_modules() -> None:
    for module in PANEL_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            # only "that panel is not written yet" is skipped; its own broken import is not
            if exc.name != module:
                raise


def overview_panels() -> list[Widget]:
    """The panels in the order PANEL_MODULES names their modules (then any other in the
    order registered): not in the order imported, which a test run or a viewer that
    imported the hunt panel first would change."""
    _import_panel_modules()

    def place(factory: PanelFactory) -> int:
        module = getattr(factory, "__module__", "")
        return PANEL_MODULES.index(module) if module in PANEL_MODULES else len(PANEL_MODULES)

    return [factory() for factory in sorted(_FACTORIES, key=place)]
