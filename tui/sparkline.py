"""One-line text sparklines for table cells (Textual's Sparkline widget is a whole widget)."""

from __future__ import annotations

import math
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
    rather than as a full one. Whatever arrives (NaN, infinities, 1e308, huge ints) draws
    something or a blank, never raises: values are bounded upstream (collectors.bounds),
    this is the last line of defence of a screen that must not crash.
    """
    tail = [_finite(v) for v in list(values)[-width:]]
    known = [v for v in tail if v is not None]
    lo = _finite(lo) or 0.0
    if not known:
        return " " * width
    top = _finite(hi) if hi is not None else max(known)
    if top is None:
        top = max(known)
    out = []
    for value in tail:
        if value is None:
            out.append(" ")
            continue
        level = _level(value, lo, top)
        out.append(_BARS[max(0, min(len(_BARS) - 1, round(level * (len(_BARS) - 1))))])
    return "".join(out).rjust(width)


def _finite(value: object) -> float | None:
    """`value` as a finite float, or None (NaN, ±inf, too large an int, not a number)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _level(value: float, lo: float, top: float) -> float:
    """Where `value` sits between `lo` and `top`, 0–1. Halved first: 1e308 − (−1e308)
    overflows to infinity, half of each does not."""
    span = top / 2 - lo / 2
    if span <= 0:
        return 0.0
    return (min(max(value, lo), top) / 2 - lo / 2) / span
