"""Counter → increase / rate, the way Prometheus' `increase()` / `rate()` treat resets.

A counter that goes down was restarted (engine restart, driver reload, NIC reset): the
increase over that step is the new value itself (it counted up from zero), never a
negative number. Unknown values (`None`) break the chain: they are skipped, and a rate
over a window with fewer than two known points is unknown.

Prometheus trusts every counter; a monitor fed by hostile or broken nodes must not. With
a `CounterTrust` (the limits live in `collectors.bounds`) a step is not trusted when the
counter rose faster than anything could carry (100 → 1e18 in a second; a "reset" to a
value it could not have counted since), or went down again within `reset_repeat_s` of
its last reset (a series that drops every scrape is not a counter): a rate over a window
holding such a step is unknown, and `step_doubt` says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Two resets of one counter closer than this are not restarts: an engine takes minutes
# to load a model, a driver reload tens of seconds.
RESET_REPEAT_S = 60.0


@dataclass(frozen=True)
class CounterTrust:
    """How a counter may move: at most `max_per_s` a second, reset at most once per
    `reset_repeat_s`."""

    max_per_s: float
    reset_repeat_s: float = RESET_REPEAT_S


def step_doubt(
    prev_t: float, prev: float, t: float, value: float, trust: CounterTrust,
    last_reset_t: float | None,
) -> str | None:
    """Why the step from `prev` (at `prev_t`) to `value` (at `t`) is not to be trusted, or
    None when it is. `last_reset_t`: when this counter last went down, if ever."""
    dt = max(t - prev_t, 0.0)
    if value >= prev:
        if value - prev > trust.max_per_s * dt:
            return f"rose by {value - prev:.3g} in {dt:.3g} s, faster than {trust.max_per_s:.3g}/s"
        return None
    if value > trust.max_per_s * dt:
        return (f"went down and restarted at {value:.3g}, more than it could count "
                f"in {dt:.3g} s")
    if last_reset_t is not None and t - last_reset_t < trust.reset_repeat_s:
        return f"went down twice within {trust.reset_repeat_s:g} s: not a counter to trust"
    return None


def counter_rate(
    points: Sequence[tuple[float, float | None]], trust: CounterTrust | None = None
) -> float | None:
    """Per-second rate over (time_s, value) points, reset-aware. None if unknown, or (with
    `trust`) if a step is not to be trusted."""
    return checked_counter_rate(points, trust)[0]


def checked_counter_rate(
    points: Sequence[tuple[float, float | None]], trust: CounterTrust | None = None
) -> tuple[float | None, str | None]:
    """`counter_rate`, and why it is unknown when a step was not trusted (else None)."""
    # one pass, no intermediate lists: a 128-node tick takes ~3,700 of these (9 ports and
    # an engine per node), and this loop was the largest share of Monitor.tick
    first_t = last_t = 0.0
    prev: float | None = None
    increase = 0.0
    known = 0
    last_reset_t: float | None = None
    for t, value in points:
        if value is None:
            continue
        if prev is None:
            first_t = t
        else:
            if trust is not None:
                doubt = step_doubt(last_t, prev, t, value, trust, last_reset_t)
                if doubt is not None:
                    return None, doubt
                if value < prev:
                    last_reset_t = t
            increase += value - prev if value >= prev else value
        prev = value
        last_t = t
        known += 1
    dt = last_t - first_t
    if known < 2 or dt <= 0:
        return None, None
    return increase / dt, None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, unknown when either is unknown or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def total(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
