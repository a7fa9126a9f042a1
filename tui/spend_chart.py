"""The session panel's spend charts, as text lines (pure functions: easy to test).

- Spend rate: $/h between successive frames (`SpendHistory.rate_usd_per_h`), one row of
  bars over the frames seen, its scale beside it, and a row of marks under it (phase
  changes by their initial, verdict starts as !).
- Spend vs budget: the session's spend from the reservation start to its end (the
  snapshot's `reservation_end`; without one, a third again past now), as a block area;
  the budget as a ─ line; the projection as a braille dot line, to the snapshot's
  `projected_spend_usd` at `reservation_end`, or at the current $/h when there is none;
  the same marks on its time axis and ┴ at now.

The viewer draws what the snapshot says: no figure here is judged, only placed.
"""

from __future__ import annotations

import datetime as dt
import math
from bisect import bisect_left
from collections.abc import Sequence

from rich.text import Text

from infertop.monitor.format import fmt_usd, fmt_usd_short
from infertop.monitor.snapshot import SessionView
from infertop.tui.history import Mark, SpendHistory, epoch_of
from infertop.tui.sparkline import sparkline

GUTTER = 7  # the label column left of every chart row
_EIGHTHS = " ▁▂▃▄▅▆▇█"
# braille cells with both dots of one row lit, top row first: a 4-dots-high line per cell
_BRAILLE_ROWS = (0x01 | 0x08, 0x02 | 0x10, 0x04 | 0x20, 0x40 | 0x80)
PROJECTION_GLYPHS = frozenset(chr(0x2800 + bits) for bits in _BRAILLE_ROWS)
NOW_GLYPH = "┴"


def _hhmm(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M")


def _gutter(label: str = "") -> Text:
    return Text(label[: GUTTER - 1].ljust(GUTTER), style="grey70")


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _mark_row(cells: list[Text | None], width: int) -> Text:
    row = Text()
    for cell in cells[:width]:
        if cell is None:
            row.append("·", "grey35")
        else:
            row.append_text(cell)
    return row


def rate_lines(history: SpendHistory, width: int) -> list[Text]:
    """The $/h row (bars scaled 0 to the highest rate, scale shown) and its marks row."""
    rates = list(history.rate_usd_per_h)[-width:]
    times = list(history.times)[-width:]
    known = [r for r in (_finite(v) for v in rates) if r is not None]
    top = max(known, default=None)
    bars = sparkline(rates, width, lo=0.0, hi=top if top else None)
    scale = (f"  $0–{fmt_usd(top)}/h" if top else "  $0/h") if known else "  waiting for two frames"
    now = _finite(rates[-1]) if rates else None
    line = Text.assemble(_gutter("$/h"), (bars, "red"), (scale, "grey70"),
                         ("  now " if now is not None else "", "grey70"),
                         f"{fmt_usd(now)}/h" if now is not None else "")
    cells: list[Text | None] = [None] * width
    offset = width - len(times)  # the bars are right-aligned: frame j is column offset + j
    for mark in history.marks:
        if times and times[0] <= mark.at <= times[-1]:
            cells[offset + bisect_left(times, mark.at)] = Text(mark.glyph, style=mark.style)
    return [line, Text.assemble(_gutter(), _mark_row(cells, width), ("  r… phase  ! verdict", "grey50"))]


def _known_spend(times: Sequence[float], spend: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """The frames with a spend figure: their times and their spend."""
    known = [(t, v) for t, v in zip(times, spend, strict=True) if v is not None]
    return [t for t, _ in known], [v for _, v in known]


def _spend_at(at: float, start: float, times: Sequence[float], spend: Sequence[float]) -> float | None:
    """Spend at `at` from the frames seen with a figure (`_known_spend`; linear between
    them); before the first frame, on the straight line from $0 at the reservation start
    (the stretch nobody watched)."""
    if not times:
        return None
    if at <= times[0]:
        t0, v0 = times[0], spend[0]
        return v0 if t0 <= start else v0 * max(0.0, at - start) / (t0 - start)
    i = bisect_left(times, at)
    if i >= len(times):
        return spend[-1]
    ta, va, tb, vb = times[i - 1], spend[i - 1], times[i], spend[i]
    return va + (vb - va) * (at - ta) / (tb - ta)


def _steps(value: float, top: float, steps: int) -> float:
    """`value` in steps of `top / steps`, clamped to 0–`steps` (0 for a value not finite)."""
    fraction = value / top
    if not math.isfinite(fraction):
        return 0.0
    return max(0.0, min(fraction, 1.0)) * steps


def budget_lines(s: SessionView, history: SpendHistory, width: int, rows: int = 2) -> list[Text]:
    """Spend vs budget over the reservation: `rows` chart rows (the budget and the
    projection named to their right) and the time axis with its span."""
    start = epoch_of(s.started_at)
    times = list(history.times)
    spend_now = _finite(s.spend_usd)
    if start is None or not times or spend_now is None:
        return [Text.assemble(_gutter("budget"), ("no spend figures yet", "grey50"))]
    now = times[-1]
    start = min(start, times[0])  # a session start after the first frame (a skewed clock)
    rate = _finite(s.cost_per_hour_usd)
    end = epoch_of(s.reservation_end)
    projected = _finite(s.projected_spend_usd)
    if end is None or end <= now:
        # no reservation end: the line at the current rate, a third of the session on
        end, projected = now + max(now - start, 60.0) / 3, None
    if projected is None and rate is not None:
        projected = spend_now + rate * (end - now) / 3600.0
    budget = _finite(s.budget_usd)
    seen = max((_finite(v) or 0.0) for v in history.spend)
    # 1.05: headroom over the highest figure; capped so that the scale stays finite
    top = min(max(v for v in (budget, projected, spend_now, seen, 0.01) if v is not None), 1e300) * 1.05
    span = end - start
    at_col = [start + (i + 0.5) * span / width for i in range(width)]
    budget_level = None if budget is None else _steps(budget, top, rows)
    # a chart cell: its character and style (none for a blank)
    grid: list[list[tuple[str, str | None]]] = [[(" ", None)] * width for _ in range(rows)]
    known_times, known_spend = _known_spend(times, history.spend)
    for col, at in enumerate(at_col):
        if at <= now:
            value = _spend_at(at, start, known_times, known_spend)
            if value is None:
                continue
            over = budget is not None and value > budget
            style = "red" if over else ("green" if at >= times[0] else "grey50")  # grey: unwatched
            eighths = round(_steps(value, top, rows * 8))
            for r in range(rows):  # r = 0 is the bottom row
                fill = max(0, min(8, eighths - r * 8))
                if fill:
                    grid[rows - 1 - r][col] = (_EIGHTHS[fill], style)
        elif projected is not None:
            value = spend_now + (projected - spend_now) * (at - now) / (end - now)
            quarters = min(rows * 4 - 1, int(_steps(value, top, rows * 4)))
            r, q = divmod(quarters, 4)
            grid[rows - 1 - r][col] = (chr(0x2800 + _BRAILLE_ROWS[3 - q]), "magenta")
        if budget_level is not None:
            r = min(rows - 1, max(0, int(budget_level)))
            if not grid[rows - 1 - r][col][0].strip():
                grid[rows - 1 - r][col] = ("─", "bold yellow")
    # what each row means, to its right: the budget, the projection, the time span
    notes = [Text() for _ in range(rows)]
    if budget is not None:
        notes[0] = Text.assemble(("  ─ ", "bold yellow"), ("budget ", "grey70"), fmt_usd(budget))
    if projected is not None:
        how = "" if s.projected_spend_usd is not None and s.reservation_end else " (now's $/h)"
        notes[-1] = Text.assemble((f"  {chr(0x2800 + _BRAILLE_ROWS[1])} ", "magenta"),
                                  ("projected ", "grey70"), fmt_usd(projected), (how, "grey70"))
    lines = []
    for i, row in enumerate(grid):
        label = fmt_usd_short(top, GUTTER - 1) if i == 0 else "$0" if i == rows - 1 else ""
        line = Text()  # as Text.assemble joins its parts, without a Text per cell
        line.append(_gutter(label))
        for char, cell_style in row:
            line.append(char, cell_style)
        line.append(notes[i])
        lines.append(line)
    axis: list[Text | None] = [None] * width
    now_col = min(width - 1, int((now - start) / span * width))
    axis[now_col] = Text(NOW_GLYPH, style="bold")
    for mark in history.marks:
        if start <= mark.at <= end:
            axis[min(width - 1, int((mark.at - start) / span * width))] = Text(mark.glyph, style=mark.style)
    axis_row = Text()
    for slot in axis:
        if slot is None:
            axis_row.append("─", "grey35")
        else:
            axis_row.append_text(slot)
    span_note = f"  {_hhmm(start)}→{_hhmm(end)} UTC {NOW_GLYPH}now"
    lines.append(Text.assemble(_gutter(), axis_row, (span_note, "grey70")))
    return lines


def spend_chart_lines(s: SessionView, history: SpendHistory, width: int, rows: int = 2) -> list[Text]:
    return [*rate_lines(history, width), *budget_lines(s, history, width, rows)]


__all__ = ["PROJECTION_GLYPHS", "Mark", "budget_lines", "rate_lines", "spend_chart_lines"]
