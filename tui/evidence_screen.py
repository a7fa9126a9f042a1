"""A verdict's evidence, ranked, each figure beside its pool's median (issue 35), and the
figure it rests on over time where the verdict carries one (an acceptance drop, issue 43).

Opened with `e` on a hunt-list row (or on a node's row: its worst verdict), every kind;
a verdict without figures says its reason is the whole evidence. Esc closes it. Draws what
the snapshot's verdict carries (`VerdictView.evidence`, `.trend`): the judging was done by
the monitor.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from infertop.monitor.format import UNKNOWN, fmt_si
from infertop.monitor.snapshot import EvidenceView, NodeView, TrendView, VerdictView
from infertop.tui.sections import SCROLL_BINDINGS, SectionKeys
from infertop.tui.sparkline import sparkline
from infertop.tui.text import inert

BOX_MAX_WIDTH = 100  # and never wider than the screen


def _figure(value: float | None, unit: str, figure: str = "") -> str:
    """A figure with its unit, the unit not said twice: "32.9" under "decode steps/s"
    (not "32.9 /s"), "1" under "GPUs power-capped" (not "1 GPUs"); a rate's unit joins
    the number ("0.2/s"); "0.02 s" under "KV transfer mean"."""
    if value is None:
        return UNKNOWN
    # below 100 by the one running-text rule: a small figure keeps its first digit (a
    # 0.018 s transfer is "0.02 s", not "0.0")
    text = f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else fmt_si(value)
    # the unit said by the figure's name as a word or its ending ("s" is no unit of
    # "KV transfer mean" for being a letter of "transfer")
    if not unit or unit in figure.split() or figure.endswith(unit):
        return text
    return f"{text}{unit}" if unit.startswith("/") else f"{text} {unit}"


def evidence_text(node: NodeView, verdict: VerdictView) -> Text:
    out = Text()
    out.append(f"{verdict.kind} evidence: ", "bold")
    out.append_text(inert(node.name, "bold", max_len=64))
    out.append("\n")
    out.append_text(inert(verdict.detail, max_len=400))
    out.append("\n\n")
    if verdict.evidence:
        out.append(f"{'figure':<32}{'this node':>14}{'pool median':>14}  off\n", "bold")
    else:
        out.append("no figures to set beside the pool for this verdict: the line above is the whole "
                   "evidence\n", "grey50")
    for e in verdict.evidence:
        out.append_text(_line(e))
    if verdict.trend is not None and verdict.trend.points:
        out.append("\n")
        out.append_text(trend_text(verdict.trend))
    out.append("\nEsc: back", "grey50")
    return out


TREND_CELLS = 60


def _trend_value(value: float | None, unit: str) -> str:
    if value is None:
        return UNKNOWN
    return f"{value * 100:.0f} %" if unit == "%" else f"{value:,.3g} {unit}".rstrip()


def trend_text(trend: TrendView) -> Text:
    """The figure over time as a sparkline on a 0-based scale, with its range and the
    level it is held against."""
    points = trend.points[-TREND_CELLS:]
    values = [p.value for p in points]
    known = [v for v in values if v is not None]
    top = max([*known, trend.reference or 0.0, 1e-9])
    out = Text()
    minutes = (points[-1].at - points[0].at) / 60.0 if len(points) > 1 else 0.0
    out.append(f"{trend.figure} over the last {minutes:.0f} min", "bold")
    if trend.step_s:
        out.append(f" (one point per {trend.step_s:.0f} s)", "grey50")
    out.append("\n")
    out.append(sparkline(values, len(values), 0.0, top), "cyan")
    out.append(f"  0–{_trend_value(top, trend.unit)}\n", "grey50")
    first, last = (known[0], known[-1]) if known else (None, None)
    lowest = min(known) if known else None
    out.append(f"from {_trend_value(first, trend.unit)} to {_trend_value(last, trend.unit)}"
               f", lowest {_trend_value(lowest, trend.unit)}")
    if trend.reference is not None:
        out.append(f"; {trend.reference_label or 'reference'} {_trend_value(trend.reference, trend.unit)}")
    out.append("\n")
    return out


def _off_text(off: float | None) -> str:
    """How far off, relative to the pool: "44 %" — or "≫ pool" when the pool's figure is
    (near) zero and a percentage would run to nine digits."""
    if off is None:
        return ""
    return "≫ pool" if off >= 100 else f"{off * 100:,.0f} %"


def _line(e: EvidenceView) -> Text:
    off = _off_text(e.off)
    # the monitor ranked them; a figure it found off is marked, the rest plain
    style = "yellow" if e.off else ""
    value, median = _figure(e.value, e.unit, e.figure), _figure(e.median, e.unit, e.figure)
    if e.value_text is not None or e.median_text is not None:  # a setting, not a number
        value, median = (inert(t or UNKNOWN, max_len=24).plain for t in (e.value_text, e.median_text))
        style = "yellow"
    figure = inert(e.figure, max_len=60).plain
    return Text(f"{figure:<32}{value:>14}{median:>14}  {off}\n", style=style)


class EvidenceScreen(SectionKeys, ModalScreen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), *SCROLL_BINDINGS]
    DEFAULT_CSS = """
    EvidenceScreen { align: center middle; }
    EvidenceScreen > VerticalScroll { width: auto; max-width: 100; height: auto; max-height: 100%;
                                      border: round $warning; padding: 1 2; background: $surface; }
    EvidenceScreen Static { width: auto; max-width: 100%; }
    """

    def __init__(self, node: NodeView, verdict: VerdictView) -> None:
        super().__init__()
        self.text = evidence_text(node, verdict)
        self.scroll_body = VerticalScroll(id="evidence-box")

    def compose(self) -> ComposeResult:
        with self.scroll_body:
            yield Static(self.text, id="evidence")

    def on_mount(self) -> None:
        self.scroll_body.focus()

    def on_resize(self, event: events.Resize) -> None:
        # as wide as its longest line, at most BOX_MAX_WIDTH and never past the screen's
        # edge (at 80 columns the box lost its right border): longer lines wrap
        self.scroll_body.styles.max_width = min(BOX_MAX_WIDTH, event.size.width)
