"""A straggler's evidence, ranked, each figure beside its pool's median (issue 35).

Opened with `e` on a straggler row of the hunt list; Esc closes it. Draws what the
snapshot's verdict carries (`VerdictView.evidence`): the judging was done by the monitor.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from infertop.monitor.format import UNKNOWN
from infertop.monitor.snapshot import EvidenceView, NodeView, VerdictView
from infertop.tui.text import inert


def _figure(value: float | None, unit: str, figure: str = "") -> str:
    """A figure with its unit, the unit not said twice: "32.9" under "decode steps/s"
    (not "32.9 /s"), "1" under "GPUs power-capped" (not "1 GPUs"); a rate's unit joins
    the number ("0.2/s")."""
    if value is None:
        return UNKNOWN
    text = f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:,.1f}"
    if not unit or unit in figure:
        return text
    return f"{text}{unit}" if unit.startswith("/") else f"{text} {unit}"


def evidence_text(node: NodeView, verdict: VerdictView) -> Text:
    out = Text()
    out.append("straggler evidence: ", "bold")
    out.append_text(inert(node.name, "bold", max_len=64))
    out.append("\n")
    out.append_text(inert(verdict.detail, max_len=400))
    out.append("\n\n")
    out.append(f"{'figure':<32}{'this node':>14}{'pool median':>14}  off\n", "bold")
    for e in verdict.evidence:
        out.append_text(_line(e))
    out.append("\nEsc: back", "grey50")
    return out


def _line(e: EvidenceView) -> Text:
    off = "" if e.off is None else f"{e.off * 100:.0f} %"
    # the monitor ranked them; a figure it found off is marked, the rest plain
    style = "yellow" if e.off else ""
    value, median = _figure(e.value, e.unit, e.figure), _figure(e.median, e.unit, e.figure)
    return Text(f"{e.figure:<32}{value:>14}{median:>14}  {off}\n", style=style)


class EvidenceScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]
    DEFAULT_CSS = """
    EvidenceScreen { align: center middle; }
    EvidenceScreen > Static { width: auto; max-width: 100; height: auto; border: round $warning;
                              padding: 1 2; background: $surface; }
    """

    def __init__(self, node: NodeView, verdict: VerdictView) -> None:
        super().__init__()
        self.text = evidence_text(node, verdict)

    def compose(self) -> ComposeResult:
        yield Static(self.text, id="evidence")
