"""What the same tokens would have cost at the DeepSeek API. Pure: no clock, no I/O.

The bundled table is DeepSeek-V4.1-Flash as published (dated `as_of`); a layout overrides
any figure under `[pricing.api]`. The API bills peak and off-peak hours differently:
peak is 01:00–04:00 and 06:00–10:00 UTC on weekdays (Monday–Friday), everything else —
the rest of a weekday and the whole of Saturday and Sunday — is off-peak.

Tokens produced over an interval are taken as spread evenly over it, so an interval
that straddles a boundary is split exactly at the boundary: the share of its tokens
billed at peak is the share of its seconds that fall in a peak window.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertop.layouts.model import ApiPriceTable

#: The bundled table (per 1M tokens): DeepSeek-V4.1-Flash, see `ApiPriceTable` defaults.
BUNDLED = ApiPriceTable()

DAY_S = 86_400
# (start, end) seconds after 00:00 UTC of a weekday
PEAK_WINDOWS_S: tuple[tuple[int, int], ...] = ((1 * 3600, 4 * 3600), (6 * 3600, 10 * 3600))
_EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday (Monday = 0)


def is_weekday(day_index: int) -> bool:
    """Day `day_index` since 1970-01-01 (UTC) is Monday–Friday."""
    return (day_index + _EPOCH_WEEKDAY) % 7 < 5


def is_peak(t: float) -> bool:
    """The instant `t` (unix seconds) bills at the peak price. Windows are [start, end)."""
    day, into = divmod(t, DAY_S)
    if not is_weekday(int(day)):
        return False
    return any(start <= into < end for start, end in PEAK_WINDOWS_S)


def peak_seconds(t0: float, t1: float) -> float:
    """Seconds of [t0, t1] that fall inside a peak window (0 when t1 <= t0)."""
    if t1 <= t0:
        return 0.0
    total = 0.0
    first_day = int(t0 // DAY_S)
    last_day = int(t1 // DAY_S)
    for day in range(first_day, last_day + 1):
        if not is_weekday(day):
            continue
        base = day * DAY_S
        for start, end in PEAK_WINDOWS_S:
            lo = max(t0, base + start)
            hi = min(t1, base + end)
            if hi > lo:
                total += hi - lo
    return total


def peak_share(t0: float, t1: float) -> float:
    """Share of [t0, t1] in peak windows; an instant (t0 == t1) is all peak or all not."""
    if t1 <= t0:
        return 1.0 if is_peak(t1) else 0.0
    return peak_seconds(t0, t1) / (t1 - t0)


def next_flip(t: float) -> float:
    """The first instant after `t` where the price window changes (peak ↔ off-peak). The
    windows never touch each other or midnight, so every window edge is a change."""
    first_day = int(t // DAY_S)
    for day in range(first_day, first_day + 8):  # a weekend is at most 3 days without one
        if not is_weekday(day):
            continue
        base = day * DAY_S
        for edge in sorted(base + e for window in PEAK_WINDOWS_S for e in window):
            if edge > t:
                return float(edge)
    raise AssertionError("no weekday within 8 days")  # pragma: no cover


def output_price_per_million(t: float, table: ApiPriceTable = BUNDLED) -> float:
    """The API's output price per 1M tokens at the instant `t`."""
    return table.output_peak if is_peak(t) else table.output_offpeak


def price_window(t: float) -> str:
    return "peak" if is_peak(t) else "off-peak"


@dataclass(frozen=True)
class ApiCost:
    """API-equivalent cost of one interval's tokens, split by what was billed."""

    output_usd: float
    input_cache_hit_usd: float
    input_cache_miss_usd: float


def _blend(share: float, offpeak: float, peak: float) -> float:
    return share * peak + (1.0 - share) * offpeak


def api_cost(
    t0: float,
    t1: float,
    output_tokens: float,
    prompt_tokens: float = 0.0,
    prompt_cached_tokens: float | None = None,
    table: ApiPriceTable = BUNDLED,
) -> ApiCost:
    """API-equivalent of tokens produced evenly over [t0, t1].

    `prompt_cached_tokens` is the cache-hit share of `prompt_tokens` from the engine's
    prefix-cache counter; `None` (the engine does not expose it) bills every prompt token
    as a cache miss — the dearer, and so the cautious, reading.
    """
    share = peak_share(t0, t1)
    hit = 0.0 if prompt_cached_tokens is None else min(max(prompt_cached_tokens, 0.0), prompt_tokens)
    miss = max(prompt_tokens - hit, 0.0)
    per_token = 1e-6
    return ApiCost(
        output_usd=output_tokens * per_token * _blend(share, table.output_offpeak, table.output_peak),
        input_cache_hit_usd=hit
        * per_token
        * _blend(share, table.input_cache_hit_offpeak, table.input_cache_hit_peak),
        input_cache_miss_usd=miss
        * per_token
        * _blend(share, table.input_cache_miss_offpeak, table.input_cache_miss_peak),
    )


def describe(table: ApiPriceTable) -> str:
    """One line naming the table, its date and whether it differs from the bundled one."""
    note = "bundled" if table == BUNDLED else "overridden in the layout"
    return f"{table.model} API prices as of {table.as_of} ({note})"
