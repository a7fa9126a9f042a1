"""Human formatting of figures, shared by the text table, the report and the TUI.
Unknown → "—"; text from outside (names, notes, evidence) → `inert_text`."""

from __future__ import annotations

import math

from infertop.collectors import safe_text
from infertop.monitor.snapshot import ClusterView, LinksView, SessionView

UNKNOWN = "—"


def inert_text(value: object, max_len: int = 200) -> str:
    """Text a node, a record or a layout supplied, safe to print: one line, every control
    written out visibly, at most `max_len` characters. The one sanitiser
    (`collectors.safe_text`), offered here to the viewers, which never import collectors."""
    return safe_text.inert_text(value, max_len)


def fmt_num(value: float | None, digits: int = 1, unit: str = "") -> str:
    """A figure in full, with `digits` decimals and separators: the one rule's most
    precise form (`figure_forms`), for text that has the room."""
    return figure_forms(value, digits, unit)[0]


def fmt_pct(fraction: float | None, digits: int = 0) -> str:
    """A 0–1 fraction as a percentage."""
    return UNKNOWN if fraction is None else figure_forms(fraction * 100, digits, "%")[0].replace(",", "")


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return UNKNOWN
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return UNKNOWN  # pragma: no cover


def fmt_bytes_pair(used: float | None, total: float | None) -> str:
    """Used / total in the total's unit, e.g. "568/1128 GiB" (one unit keeps columns narrow)."""
    if used is None and total is None:
        return UNKNOWN
    if total is None:
        return fmt_bytes(used)
    scale, unit = 1.0, "B"
    for candidate in ("KiB", "MiB", "GiB", "TiB"):
        if total < scale * 1024:
            break
        scale, unit = scale * 1024, candidate
    digits = 1 if total / scale < 10 else 0  # "0.1/2.0 TiB", not "0/2 TiB"
    used_text = UNKNOWN if used is None else f"{used / scale:.{digits}f}"
    return f"{used_text}/{total / scale:.{digits}f} {unit}"


def fmt_power_w(watts: float | None) -> str:
    if watts is None:
        return UNKNOWN
    return f"{watts:.0f} W" if abs(watts) < 10_000 else f"{watts / 1000:.1f} kW"


def fmt_rate_gbps(bytes_per_s: float | None) -> str:
    """Bytes/s as Gb/s (links are rated in bits)."""
    if bytes_per_s is None:
        return UNKNOWN
    gbps = bytes_per_s * 8 / 1e9
    return f"{gbps:.2f} Gb/s" if gbps < 10 else f"{gbps:.0f} Gb/s"


def fmt_usd(value: float | None, digits: int = 2) -> str:
    """Dollars in full ("$1,354.50", "-$3.00"): the one rule's most precise form."""
    return figure_forms(value, digits, money=True)[0]


def fmt_usd_short(value: float | None, max_chars: int = 6) -> str:
    """Dollars in at most `max_chars` characters, for a chart's axis: whole dollars with
    separators while they fit ("$9,999"), then thousands, millions, billions ("$30.5k",
    "$305k", "$1.2M"), never cut ("$30,52" read as thirty dollars)."""
    if value is None:
        return UNKNOWN
    candidates = [f"${value:,.2f}"] if abs(value) < 10 else []
    candidates.append(f"${value:,.0f}")
    for unit, scale in (("k", 1e3), ("M", 1e6), ("B", 1e9)):
        if abs(round(value / scale)) < 1000 or unit == "B":  # "$1235k" is "$1.2M"
            candidates += [f"${value / scale:.1f}{unit}", f"${value / scale:.0f}{unit}"]
    return next((c for c in candidates if len(c) <= max_chars), candidates[-1])


def fmt_age(seconds: float | None) -> str:
    if seconds is None:
        return UNKNOWN
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return UNKNOWN
    s = int(seconds)
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def fmt_span(seconds: float | None, precise: bool = False) -> str:
    """A length of time for people: "1d02h", "2h05m", "3m07s" ("2h05m09s" when precise)."""
    if seconds is None:
        return UNKNOWN
    s = round(seconds)
    days, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if days and not precise:
        return f"{days}d{h:02d}h"
    h += days * 24
    if h:
        return f"{h}h{m:02d}m{s:02d}s" if precise else f"{h}h{m:02d}m"
    return f"{m}m{s:02d}s"


def links_text(links: LinksView | None) -> str:
    """A node's ports at a glance, "3/4 up slow"; unknown when no port state is known."""
    if links is None or links.total == 0 or links.up + links.down == 0:
        return UNKNOWN  # no port, or no state known for any: unknown, not "0 up"
    return f"{links.up}/{links.total} up" + (" slow" if links.degraded else "")
def fmt_latency(value_s: float | None, bounds: tuple[float, float | None] | None = None) -> str:
    """A percentile interpolated within a histogram bucket, with the bucket it lies in:
    "38 ms (25–50)"; past the highest bound "> 80 s". Seconds under 1 s read in ms."""
    if value_s is None:
        return UNKNOWN

    def show(x: float, scale: float) -> str:
        # four significant digits, never "1.235e+04": whole units from 1,000 up
        v = x * scale
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return fmt_si(v) if 0 < abs(v) < 0.001 else f"{v:.4g}"

    # the value's unit for the bounds too: "800 ms (750–1,000)"
    scale, unit = (1e3, " ms") if value_s < 1 else (1.0, " s")
    if bounds is None:
        return f"{show(value_s, scale)}{unit}"
    lower, upper = bounds
    if upper is None:
        return f"> {show(lower, scale)}{unit}"
    return f"{show(value_s, scale)}{unit} ({show(lower, scale)}–{show(upper, scale)})"


def fmt_scoreboard_p99(cluster: ClusterView, session: SessionView, latency: str, bounds: bool = False) -> str:
    """The scoreboard's p99 of `latency` ("ttft", "itl") from the pool the monitor chose
    for it (`session.ttft_pool` / `itl_pool`), that pool named first where it is not the
    live point's: on a disaggregated cluster TTFT is the prefill pool's ("prefill 995 ms")."""
    role = getattr(session, f"{latency}_pool")
    pool = cluster.pool(role)
    if pool is None:
        return UNKNOWN
    text = fmt_latency(getattr(pool, f"{latency}_p99_s"),
                       pool.latency_bounds_s.get(f"{latency}_p99") if bounds else None)
    return text if role == session.live_point_pool else f"{inert_text(role, 20)} {text}"


def fmt_clock(iso: str | None) -> str:
    """"2026-11-29 12:00 UTC" from an ISO 8601 UTC time, the one way a viewer writes one
    (the text comes from a snapshot, perhaps a record's: made inert)."""
    if iso is None:
        return UNKNOWN
    return inert_text(iso[:16].replace("T", " "), 16) + " UTC"


# -- fitting a figure into a cell: the one rule ---------------------------------------
# A figure too wide for its cell is written shorter, never cut: fewer decimals, then SI
# prefixes ("$84.66" → "$84.7" → "$85"; "5,400/s" → "5.4k/s"). A shorter form must keep
# two significant digits (or be exact): "$1k" for $1,354 or "$0" for $0.03 would be a
# different figure, not a shorter one. Never scientific notation ("5.4e+03").
SI_PREFIXES = ("", "k", "M", "G", "T", "P", "E")


def _significant(text: str) -> int:
    """Significant digits written in a plain decimal ("84.7" → 3, "0.030" → 2)."""
    digits = "".join(ch for ch in text if ch.isdigit()).lstrip("0")
    return len(digits)


def _scaled(value: float) -> tuple[float, str]:
    """`value` scaled by 1000s below 1,000 (rounded to 1 decimal), with its prefix."""
    scaled, prefix = value, 0
    while abs(round(scaled, 1)) >= 1000 and prefix < len(SI_PREFIXES) - 1:
        scaled /= 1000
        prefix += 1
    return scaled, SI_PREFIXES[prefix]


def figure_forms(value: float | None, digits: int = 1, unit: str = "",
                 money: bool = False) -> tuple[str, ...]:
    """Every way to write `value` that this project accepts, most precise first: with
    `digits` decimals and thousands separators, then fewer decimals, then scaled by SI
    prefixes. `unit` follows the number as written ("/s", " W"); `money` puts "$" first.
    Unknown is "—"."""
    if value is None:
        return (UNKNOWN,)
    sign = "-" if value < 0 else ""
    magnitude = abs(value)

    def dress(number: str, prefix: str = "") -> str:
        return f"{sign}{'$' if money else ''}{number}{prefix}{unit}"

    exact = float(magnitude).is_integer()
    numbers: list[tuple[str, str]] = []
    for d in range(max(digits, 0), -1, -1):
        numbers.append((f"{magnitude:,.{d}f}", ""))
    if magnitude >= 1000:
        scaled, prefix = _scaled(magnitude)
        numbers += [(f"{scaled:.1f}", prefix), (f"{scaled:.0f}", prefix)]
    forms: list[str] = []
    for number, prefix in numbers:
        plain = number.replace(",", "")
        kept = _significant(plain)
        is_exact = exact and not prefix and float(plain) == magnitude
        if forms and not is_exact and (kept < 2 or (magnitude and not float(plain))):
            continue  # too few digits left: a different figure, not a shorter one
        form = dress(number, prefix)
        if form not in forms:
            forms.append(form)
    return tuple(forms)


def fit_forms(forms: tuple[str, ...] | list[str], width: int) -> str | None:
    """The most precise of `forms` (most precise first) within `width` characters;
    None when even the shortest does not fit: then the figure's column goes whole."""
    return next((form for form in forms if len(form) <= width), None)


def fit_figure(value: float | None, width: int, digits: int = 1, unit: str = "",
               money: bool = False) -> str | None:
    """`value` written to fit `width` characters by the one rule (`figure_forms`),
    None when it cannot: the caller leaves the column out and says so."""
    return fit_forms(figure_forms(value, digits, unit, money), width)


def fmt_exact(value: float | None, unit: str = "", digits: int = 3) -> str:
    """A rated figure written exactly, with no decimals it lacks ("400 Gb/s", "2.5 Gb/s"):
    the shortest of the one rule's forms (`figure_forms`) that is still `value` itself."""
    forms = figure_forms(value, digits, unit)
    if value is None:
        return forms[0]
    exact = [f for f in forms if f.endswith(unit) and _is(f.removesuffix(unit), value)]
    return min(exact, key=len) if exact else forms[0]


def _is(number: str, value: float) -> bool:
    plain = number.lstrip("-").replace(",", "")
    try:
        return float(plain) == abs(value)
    except ValueError:
        return False


def detail_forms(nodes: int, of: int, every_s: float | None) -> tuple[str, ...]:
    """How much per-node detail a tick read (the prom source's detail plan,
    collectors/sources/prom_detail.py), longest first for `fit_forms`: "detail for 124 of
    1,250 nodes this tick; every node within 30 s"."""
    if every_s is None:
        return (f"detail for all {of:,} nodes every tick", f"detail all {of:,} nodes", "detail all")
    bound = fmt_exact(every_s, " s")
    return (f"detail for {nodes:,} of {of:,} nodes this tick; every node within {bound}",
            f"detail {nodes:,} of {of:,} nodes, every node within {bound}",
            f"detail {nodes:,}/{of:,}, all ≤ {bound}",
            f"detail {nodes:,}/{of:,}")


def fmt_si(value: float | None, unit: str = "", digits: int = 1) -> str:
    """A figure in running text, compact and never scientific: below 1,000 with up to
    `digits` decimals ("32.9/s", "0.05/s"), above it with an SI prefix ("5.4k/s",
    "2.0M/s")."""
    if value is None:
        return UNKNOWN
    magnitude = abs(value)
    sign = "-" if value < 0 else ""
    if round(magnitude, digits) < 1000:
        if 0 < magnitude < 1:  # a small rate keeps its first digit ("0.05/s", not "0.1/s")
            digits = min(max(digits, -math.floor(math.log10(magnitude))), 12)
        return f"{sign}{magnitude:.{digits}f}{unit}"
    scaled, prefix = _scaled(magnitude)
    return f"{sign}{scaled:.1f}{prefix}{unit}" if scaled < 100 else f"{sign}{scaled:.0f}{prefix}{unit}"

def fmt_pool(median: float | None, unit: str = "", digits: int = 1) -> str:
    """The pool's baseline beside a node's figure in running text, by the one rule
    (`fmt_si`): "pool 801.0/s"; a pool whose figure is zero is "pool quiet" (a "0.0/s"
    beside 20k/s reads as a counter gone dead, not as a quiet fabric), and a pool with no
    reading of it (no peers, or none that read it) "no pool baseline"."""
    if median is None:
        return "no pool baseline"
    if median == 0:
        return "pool quiet"
    return f"pool {fmt_si(median, unit, digits)}"


def fmt_lapse(seconds: float) -> str:
    """A stretch of time in the words a sentence uses: "40 s", "4 min", "23 h", "2.5 d"."""
    if seconds < 90:
        return f"{max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600)} h"
    return f"{seconds / 86400:.1f} d"


def stretch_words(s: SessionView) -> str | None:
    """Which stretch the session's $/unit figures ($/1M, $/request, spend ÷ API) cover,
    said where it is not the whole reservation: "over the last 4 min watched"."""
    if s.reservation_starts_in_s is not None:
        return f"reservation starts in {fmt_lapse(s.reservation_starts_in_s)}: nothing billed yet"
    if s.usd_per_million_span != "watched":
        return None
    if s.span_s is None:
        return "waiting for every engine's next reading to count over"
    return f"over the last {fmt_lapse(s.span_s)} watched"


def reservation_words(s: SessionView) -> str | None:
    """The reservation's edges in words, where one has been passed or not yet reached."""
    if s.reservation_starts_in_s is not None:
        lapse = fmt_lapse(s.reservation_starts_in_s)
        return f"reservation starts in {lapse} ({fmt_clock(s.started_at)}): nothing billed before"
    if s.reservation_ended:
        billed = ("the layout says the hardware is billed on after it"
                  if s.billed_after_end else "nothing billed after it (billed_after_end = false)")
        return f"the reservation ended at {fmt_clock(s.reservation_end)}: {billed}"
    return None
