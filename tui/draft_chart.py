"""Acceptance per draft position as a small bar chart (the node screen's engine block).

One bar per position of the draft, its length the share of drafts whose token at that
position was accepted (`EngineView.acceptance_by_position`, judged nowhere here): a drafter
that fails at its first token has a short first bar; one that fails late, short last bars.
Pure (Rich `Text` only).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from infertop.monitor.format import UNKNOWN, fmt_pct
from infertop.tui.columns import GREY

CHART_CELLS = 30  # the bars of every position together, at most
FULL, EMPTY = "█", "░"
EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(share: float | None, width: int) -> str:
    """`share` (0–1) of `width` cells, to an eighth of a cell; unknown: blank cells."""
    if share is None:
        return " " * width
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    whole, part = divmod(eighths, 8)
    drawn = FULL * whole + (EIGHTHS[part] if part else "")
    return drawn + EMPTY * (width - len(drawn))


def position_chart(shares: Sequence[float | None] | None) -> Text:
    """"by draft position  1 ████████░░ 80%  2 █████░░░░░ 50% …"; empty when not served."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if not shares:
        return out
    width = max(3, CHART_CELLS // len(shares))
    out.append("accepted by draft position", GREY)
    for position, share in enumerate(shares, start=1):
        out.append(f"  {position} ", GREY)
        out.append(bar(share, width), "cyan")
        out.append(f" {fmt_pct(share) if share is not None else UNKNOWN}")
    return out
