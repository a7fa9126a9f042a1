"""One-line text sparklines for table cells (Textual's Sparkline widget is a whole widget)."""

from __future__ import annotations

from collections.abc import Sequence

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(
    values: Sequence[float | None],
    width: int,
    lo: float = 0.0,
    hi: float | None = None,
) -> str:
    """The last `width` values as bars scaled to [lo, hi]; unknown values are blanks.

    `hi` defaults to the largest known value, so a flat series shows as a low line
    rather than as a full one.
    """
    tail = list(values)[-width:]
    known = [v for v in tail if v is not None]
    if not known:
        return " " * width
    top = max(known) if hi is None else hi
    span = top - lo
    out = []
    for value in tail:
        if value is None:
            out.append(" ")
            continue
        level = 0.0 if span <= 0 else (min(max(value, lo), top) - lo) / span
        out.append(_BARS[round(level * (len(_BARS) - 1))])
    return "".join(out).rjust(width)
