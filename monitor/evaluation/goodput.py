"""Goodput and the cost of a good token, from the latency histograms and the [slo] targets.

The share of a window's requests within a target is read off the histogram's cumulative
buckets over the window. Where the target is a bucket bound the share is exact; where it
falls inside a bucket the share is only known to lie between the cumulative count at the
bucket's lower bound and at its upper bound: both are given, and which bucket straddles
which target is said — never a point inside it (`share_bounds`).

TTFT counts requests (one observation each); ITL counts inter-token gaps, i.e. tokens.
With both targets the share of tokens within both is not in the histograms (they are
not joint): it lies between max(0, a + b − 1) and min(a, b) for shares a, b (Fréchet's
bounds), each taken at its own bucket bounds. With one target it is that target's share.

Good tokens/s = output tokens/s × that share (the tokens of requests within the target:
the histograms cannot tell which requests made more tokens, so this is a bound on the
share, not a per-request count); the cost of a good token is $/h ÷ good tokens/h, a
range from the share's bounds beside the plain $/1M (docs/money.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infertop.monitor.evaluation.latency import Buckets


@dataclass(frozen=True)
class ShareBounds:
    low: float  # share within the target, at least
    high: float  # at most (equal to low where the target is a bucket bound)
    straddled: tuple[float, float | None] | None = None  # the bucket (lower, upper; None: +Inf)


def share_bounds(buckets: Buckets | None, target_s: float) -> ShareBounds | None:
    """The share of the observations at or under `target_s`, bounded by the bucket that
    holds the target; None with no observation in the window."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    below_le, below = 0.0, 0.0
    for le, count in buckets:
        if le == target_s:
            share = min(1.0, count / total)
            return ShareBounds(share, share)
        if le > target_s:
            upper = None if math.isinf(le) else le
            return ShareBounds(min(1.0, below / total), min(1.0, count / total), (below_le, upper))
        below_le, below = le, count
    return ShareBounds(1.0, 1.0)


# a p99 target: 99 % of the observations within it
P99_SHARE = 0.99


def misses_p99(bounds: ShareBounds | None) -> bool:
    """The one rule for a p99 target's miss (the `slo` verdict): at most fewer than 99 %
    within it, i.e. the share's high bound under 0.99 — the same as the p99's whole bucket
    lying past the target. A bucket that straddles the target so that 99 % may be within
    is never called a miss; unknown (no observation) is no miss either, nor healthy."""
    return bounds is not None and bounds.high < P99_SHARE


def attainment_fields(name: str, bounds: ShareBounds | None) -> dict[str, float | None]:
    """`slo_<name>_attainment` (at least: the low bound) and `slo_<name>_attainment_high`
    (at most), from `share_bounds`: equal where the target is a bucket bound."""
    return {f"slo_{name}_attainment": None if bounds is None else bounds.low,
            f"slo_{name}_attainment_high": None if bounds is None else bounds.high}


def joint(a: ShareBounds | None, b: ShareBounds | None) -> tuple[float, float] | None:
    """Bounds on the share within both targets (one alone: its own)."""
    if a is None or b is None:
        one = a if a is not None else b
        return None if one is None else (one.low, one.high)
    return max(0.0, a.low + b.low - 1.0), min(a.high, b.high)


def _ms(value: float | None) -> str:
    return "∞" if value is None else f"{value * 1000:g} ms"


def straddle_note(name: str, target_s: float, bounds: ShareBounds | None) -> str | None:
    if bounds is None or bounds.straddled is None:
        return None
    lower, upper = bounds.straddled
    return (f"{name} target {_ms(target_s)} inside the bucket {_ms(lower)}–{_ms(upper)}: "
            f"{bounds.low * 100:.1f}–{bounds.high * 100:.1f} % within")


@dataclass(frozen=True)
class Goodput:
    share_low: float | None = None
    share_high: float | None = None
    note: str | None = None  # which bucket straddles which target; None: exact, or unknown


def goodput(ttft: Buckets | None, itl: Buckets | None,
            ttft_target_s: float | None, itl_target_s: float | None) -> Goodput:
    """The window's share within every [slo] target, as bounds, with what widens them."""
    a = share_bounds(ttft, ttft_target_s) if ttft_target_s is not None else None
    b = share_bounds(itl, itl_target_s) if itl_target_s is not None else None
    if (ttft_target_s is not None and a is None) or (itl_target_s is not None and b is None):
        return Goodput()  # a target with no observation in the window: unknown, not good
    both = joint(a, b)
    if both is None:
        return Goodput()
    notes = [n for n in (straddle_note("TTFT", ttft_target_s or 0.0, a),
                         straddle_note("ITL", itl_target_s or 0.0, b)) if n]
    if a is not None and b is not None:
        notes.append("TTFT and ITL shares are not joint: bounded by max(0, a + b − 1) … min(a, b)")
    return Goodput(both[0], both[1], "; ".join(notes) or None)


def usd_per_million(
    usd_per_hour: float | None, tokens_per_s: float | None, share: float | None = 1.0
) -> float | None:
    """$ per 1M tokens (× share of them good) at this $/h; None where no token is made."""
    if usd_per_hour is None or tokens_per_s is None or share is None:
        return None
    good = tokens_per_s * share * 3600.0
    return usd_per_hour / good * 1e6 if good > 0 else None


def share_fields(g: Goodput) -> dict[str, float | str | None]:
    return {"goodput_share_low": g.share_low, "goodput_share_high": g.share_high, "goodput_note": g.note}


def cost_fields(usd_per_hour: float | None, tokens_per_s: float | None,
                share_low: float | None, share_high: float | None) -> dict[str, float | None]:
    """$/1M tokens now, plain and good: the cheapest good token at the share's high
    bound, the dearest at its low (None where the low bound is 0: no good token is sure)."""
    return {
        "usd_per_million_output_tokens_now": usd_per_million(usd_per_hour, tokens_per_s),
        "usd_per_million_good_tokens_low": usd_per_million(usd_per_hour, tokens_per_s, share_high),
        "usd_per_million_good_tokens_high": usd_per_million(usd_per_hour, tokens_per_s, share_low),
    }
