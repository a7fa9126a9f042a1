"""The session panel: running spend, spend by phase, idle spend, $/1M tokens, the
API-equivalent, a budget bar, charts of the spend rate and of spend vs budget with its
projection (`tui.spend_chart`), and accepted tokens/s over time.

Registered with `tui.panels` on import. Also holds the phase picker (a modal the app
opens with a key) so that everything about the session lives in one module.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from infertop.monitor.evaluation.money import api_output_tokens_for
from infertop.monitor.evaluation.phases import PHASES
from infertop.monitor.format import (
    fmt_clock,
    fmt_num,
    fmt_pct,
    fmt_span,
    fmt_usd,
    reservation_words,
    stretch_words,
)
from infertop.monitor.snapshot import RollupView, SessionView, Snapshot
from infertop.tui.history import SpendHistory
from infertop.tui.panels import register_panel
from infertop.tui.sparkline import sparkline
from infertop.tui.spend_chart import spend_chart_lines
from infertop.tui.text import inert
from infertop.tui.text_lines import TextLines

CHART_POINTS = 240  # frames kept for the chart: 4 minutes at 1 s


def budget_bar(used: float | None, width: int = 20) -> Text:
    """█ for spent, ░ for left; yellow from 80 %, red at 100 %."""
    if used is None:
        return Text("─" * width, style="grey50")
    filled = max(0, min(width, round(used * width)))
    style = "red" if used >= 1.0 else "yellow" if used >= 0.8 else "green"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="grey50")


def breakeven_lines(s: SessionView) -> list[Text]:
    """Break-even against the API in the current price window: the output tokens/s needed,
    the tokens/s now, and what a day of the cluster would buy from the API."""
    if s.breakeven_output_tokens_per_s is None:
        return []
    needed = s.breakeven_output_tokens_per_s
    now = s.accepted_tokens_per_s
    share = "" if now is None or needed <= 0 else f" ({fmt_pct(now / needed, 1)} of it)"
    lines = [Text.assemble(
        ("break-even ", "grey70"), (f"{fmt_num(needed, 0)} output tok/s", "bold"),
        (f"  {s.price_window} at {fmt_usd(s.api_output_usd_per_million)}/1M until ", "grey70"),
        fmt_clock(s.price_window_flips_at),
        ("  now ", "grey70"), (f"{fmt_num(now, 0)} tok/s{share}",
                                "green" if now is not None and now >= needed else ""),
    )]
    day_usd = None if s.cost_per_hour_usd is None else s.cost_per_hour_usd * 24.0
    bought = api_output_tokens_for(day_usd, s.api_output_usd_per_million)
    if day_usd is not None and bought is not None:
        lines.append(Text(
            f"{fmt_usd(day_usd, 0)} a day buys {fmt_num(bought / 1e9, 1)} billion output tokens "
            f"{s.price_window} from the API", style="grey70",
        ))
    return lines


def session_lines(s: SessionView, history: SpendHistory, chart_width: int = 40,
                  tokens_from: RollupView | None = None) -> list[Text]:
    """The panel's text, one `Text` per line (a pure function: easy to test).
    `tokens_from`: the roll-up the session's tokens/s is (the cluster's), for its count."""
    lines: list[Text] = []
    head = Text.assemble(
        ("spend ", "grey70"), (fmt_usd(s.spend_usd), "bold"),
        ("  at ", "grey70"), f"{fmt_usd(s.cost_per_hour_usd)}/h",
        ("  idle ", "grey70"), fmt_usd(s.idle_spend_usd),
        f" (now {fmt_usd(s.idle_cost_per_hour_usd)}/h)",
        *((("  extras ", "grey70"), f"{fmt_usd(s.extras_cost_per_hour_usd)}/h")
          if s.extras_cost_per_hour_usd else ()),
        ("  phase ", "grey70"), (s.phase, "bold cyan"),
        # how long this phase has run (the session's length is the header's)
        *((("  for ", "grey70"), fmt_span(s.phase_elapsed_s)) if s.phase_elapsed_s is not None else ()),
    )
    lines.append(head)
    if s.budget_usd is not None:
        style = {"80%": "yellow", "100%": "bold red"}.get(s.budget_alert or "", "")
        budget: list[Text | str | tuple[str, str]] = [
            ("budget ", "grey70"), budget_bar(s.budget_used_fraction),
            (f" {s.budget_label or fmt_usd(s.budget_usd)}", style),
        ]
        if s.budget_exhausted_in_s is not None:  # only before the budget is reached
            budget += [("  runs out in ", "grey70"), fmt_span(s.budget_exhausted_in_s)]
        lines.append(Text.assemble(*budget))
    if s.projected_spend_usd is not None:
        holds = (
            "" if s.budget_holds is None
            else "  within budget" if s.budget_holds
            else f"  over budget by {fmt_usd(s.projected_spend_usd - (s.budget_usd or 0.0))}"
        )
        lines.append(Text.assemble(
            ("projected ", "grey70"), (fmt_usd(s.projected_spend_usd), "bold"),
            ("  by the reservation end ", "grey70"), fmt_clock(s.reservation_end),
            ("  at the current $/h", "grey70"),
            (holds, "green" if s.budget_holds else "bold red"),
        ))
    edge = reservation_words(s)
    if edge is not None:
        lines.append(Text(edge, style="yellow"))
    stretch = stretch_words(s)
    lines.append(Text.assemble(
        ("$/1M tok ", "grey70"), fmt_usd(s.usd_per_million_output_tokens, 3),
        *(((f" {stretch}", "yellow"),) if stretch is not None and s.reservation_starts_in_s is None else ()),
        ("  now ", "grey70"), fmt_usd(s.usd_per_million_output_tokens_now, 3),
        ("  $/request ", "grey70"), fmt_usd(s.usd_per_request, 4),
        ("  $/task ", "grey70"), fmt_usd(s.usd_per_acceptable_task, 4),
        ("  tokens ", "grey70"), fmt_num(s.accepted_tokens, 0),
    ))
    lines.extend(line for line in (stretch_goodput_line(s, stretch), goodput_line(s)) if line is not None)
    ratio = s.api_break_even_ratio
    verdict = "" if ratio is None else ("  cheaper than the API" if ratio < 1 else "  dearer than the API")
    lines.append(Text.assemble(
        ("API-equivalent ", "grey70"), fmt_usd(s.api_equivalent_usd, 4),
        ("  spend ÷ API ", "grey70"), fmt_num(ratio, 2), (verdict, "grey70"),
    ))
    lines.extend(breakeven_lines(s))
    if s.energy_kwh is not None:
        lines.append(Text.assemble(
            ("energy ", "grey70"), f"{fmt_num(s.energy_kwh, 3)} kWh",
            ("  per output token ", "grey70"), fmt_num(s.joules_per_output_token, 2, " J"),
            *((("  energy bill ", "grey70"), fmt_usd(s.energy_usd)) if s.energy_usd is not None else ()),
        ))
    if s.spend_by_phase:
        parts: list[Text | str | tuple[str, str]] = [("by phase ", "grey70")]
        for p in s.spend_by_phase:
            parts += [(p.phase, "cyan"), f" {fmt_usd(p.spend_usd)} ({fmt_span(p.seconds)})  "]
        lines.append(Text.assemble(*parts))
    # spend as a rate ($/h between frames) and against the budget with its projection:
    # a cumulative figure drawn as bars is a solid block
    lines += spend_chart_lines(s, history, chart_width)
    counted = ""
    if tokens_from is not None and tokens_from.partial:  # a partial sum says so
        counted = f" ({tokens_from.nodes_counted}/{tokens_from.nodes_expected} nodes)"
    lines.append(Text.assemble(("tok/s  ", "grey70"), (sparkline(history.tokens_per_s, chart_width), "blue"),
                               f" {fmt_num(s.accepted_tokens_per_s, 0)}", (counted, "yellow")))
    if s.api_cache_note and "cache misses" in s.api_cache_note:
        lines.append(Text.assemble(("note ", "grey70"), inert(s.api_cache_note, "grey50", 120)))
    if s.usd_per_million_span == "watched":
        # the engines' counters began before the reservation (or do not say when): the
        # token figures cover only the stretch since infertop had read every engine
        lines.append(Text.assemble(
            ("note ", "grey70"),
            (f"tokens counted from {fmt_clock(s.tokens_since)}: $/1M, $/request and spend ÷ API "
             f"set them against the {fmt_usd(s.span_spend_usd)} spent over the same stretch, "
             f"not the whole {fmt_usd(s.spend_usd)}", "yellow"),
        ))
    for note in s.notes[:2]:  # counter steps the ledger left out: tokens would be wrong
        lines.append(Text.assemble(("note ", "grey70"), inert(note, "yellow", 120)))
    record = s.record_path
    lines.append(Text.assemble(("record ", "grey70"),
                               inert(record, "grey50", 120) if record else Text("off", "grey50")))
    return lines


class SessionPanel(Vertical):
    DEFAULT_CSS = """
    SessionPanel {
        height: auto;
        max-height: 22;  /* budget, projection, break-even, energy, the spend charts: up to 20 lines */
        width: 3fr;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
    }
    SessionPanel > TextLines { height: auto; }
    """

    def __init__(self) -> None:
        super().__init__(id="session-panel")
        self.border_title = "session"
        # drawn line by line, an unchanged line from a cache; a layout of the whole screen
        # only when the panel's height changes (at 128 nodes a layout pass costs ms)
        self.body = TextLines([Text("waiting for the first tick…")], id="session-body")
        self.history = SpendHistory(CHART_POINTS)
        self.last_taken_at: str | None = None

    def compose(self) -> ComposeResult:
        yield self.body

    def show_snapshot(self, snapshot: Snapshot) -> None:
        s = snapshot.session
        if snapshot.taken_at != self.last_taken_at:  # a re-render is not a new point
            self.last_taken_at = snapshot.taken_at
            self.history.record(snapshot)
        # room left of the charts for their labels (7) and right for the $/h scale (~34)
        width = max(10, min(CHART_POINTS, (self.size.width or 60) - 43))
        self.body.update(session_lines(s, self.history, width, tokens_from=snapshot.cluster.total))
        alert = f" · budget {s.budget_label}" if s.budget_alert and s.budget_label else ""
        # not the spend (the header and the first line have it): a title that changes
        # repaints the whole panel, every frame (terminal bytes, docs/performance.md)
        title = f"session{alert}"
        if title != self.border_title:
            self.border_title = title


class PhasePicker(ModalScreen[str | None]):
    """Pick the phase spend is attributed to from now on (Enter), or Esc to leave it."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]
    DEFAULT_CSS = """
    PhasePicker { align: center middle; }
    PhasePicker > OptionList { width: 40; height: auto; border: round $primary; }
    """

    def __init__(self, current: str | None = None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        options = OptionList(*[Option(f"{p}{'  (now)' if p == self.current else ''}", id=p) for p in PHASES])
        options.border_title = "mark phase"
        yield options

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in PHASES:
            options.highlighted = PHASES.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


register_panel(SessionPanel)


def _range(low: str, high: str) -> str:
    return low if low == high else f"{low}–{high}"


def stretch_goodput_line(s: SessionView, stretch: str | None) -> Text | None:
    """Within the [slo] targets over the stretch the $/1M above covers (`stretch`: its
    words, as that line says them), and its spend per 1M good tokens; or why unknown."""
    low, high = s.span_goodput_share_low, s.span_goodput_share_high
    words = ((f" {stretch}", "yellow"),) if stretch is not None and s.reservation_starts_in_s is None else ()
    if low is None or high is None:
        if s.span_goodput_note is None:
            return None
        return Text.assemble(("session within SLO ", "grey70"), "—", *words,
                             (f"  ({s.span_goodput_note})", "yellow"))
    share = _range(fmt_num(low * 100, 1), fmt_num(high * 100, 1)) + " %"
    dear = s.span_usd_per_million_good_tokens_high
    cost = _range(fmt_usd(s.span_usd_per_million_good_tokens_low, 3),
                  fmt_usd(dear, 3) if dear is not None else "no bound")
    line = Text.assemble(("session within SLO ", "grey70"), (share, "bold"), *words,
                         ("  $/1M good tok ", "grey70"), cost)
    if s.span_goodput_note:
        line.append(f"  ({s.span_goodput_note})", "yellow")
    return line


def goodput_line(s: SessionView) -> Text | None:
    """Within the [slo] targets now: the share (a range where a bucket straddles a target)
    and $/1M good tokens beside the plain $/1M now; None without [slo] figures."""
    if s.goodput_share_low is None or s.goodput_share_high is None:
        return None
    share = _range(fmt_num(s.goodput_share_low * 100, 1), fmt_num(s.goodput_share_high * 100, 1)) + " %"
    high = s.usd_per_million_good_tokens_high
    dearest = fmt_usd(high, 3) if high is not None else "no bound"
    cost = _range(fmt_usd(s.usd_per_million_good_tokens_low, 3), dearest)
    line = Text.assemble(("now within SLO ", "grey70"), (share, "bold"), ("  $/1M good tok ", "grey70"), cost,
                         ("  plain ", "grey70"), fmt_usd(s.usd_per_million_output_tokens_now, 3))
    if s.goodput_note:
        line.append(f"  ({s.goodput_note})", "yellow")
    return line
