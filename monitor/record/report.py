"""`infertop report FILE`: a recording → Markdown summary, CSVs, and an SVG chart.

The totals are the ledger's own (the figures the live session showed), never re-summed
from rounded per-tick values; the per-hour split divides each tick's charge across the
hours it spans, in proportion to time (the rate is constant within a tick), so the hours
add up to the total exactly.
"""

from __future__ import annotations

import csv
import datetime as dt
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from xml.sax.saxutils import escape

from infertop.collectors.safe_text import inert_text
from infertop.monitor.evaluation.api_price import describe
from infertop.monitor.evaluation.ledger import CLUSTER_ROW, ZERO
from infertop.monitor.evaluation.money import usd_per
from infertop.monitor.format import fmt_num, fmt_pct, fmt_span, fmt_usd, reservation_words, stretch_words
from infertop.monitor.record.incidents import Incident, Scan, scan
from infertop.monitor.record.recording import Recording, TickRow
from infertop.monitor.record.report_scoreboard import (
    live_points,
    sampled_snapshots,
    scoreboard_markdown,
    scoreboard_svg,
)
from infertop.monitor.record.report_timeline import (
    TIMELINE_COLUMNS,
    recorded_timeline,
    timeline_markdown,
    timeline_rows,
)
from infertop.monitor.snapshot import SessionView

HOUR_S = 3600.0
# a report line holds a path, a cluster name, a price table: generous, but bounded
MAX_TEXT_CHARS = 500


def clean(text: object) -> str:
    """Text from a layout or a record, inert (`inert_text`) and safe in a Markdown table."""
    return inert_text(text, MAX_TEXT_CHARS).replace("|", "\\|")


def iso_utc(t: float) -> str:
    """ISO 8601 for the CSVs (machines read them)."""
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def iso(t: float | None) -> str:
    if t is None:
        return "—"
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass
class HourRow:
    hour_start: float
    spend_usd: Decimal
    output_tokens: float
    watched_s: float


def split_by_hour(
    started_at: float, ticks: Sequence[TickRow]
) -> list[HourRow]:
    """Each tick's spend and tokens since the previous tick, spread over the hours it spans."""
    hours: dict[float, HourRow] = {}
    prev_at = started_at
    prev_spend = ZERO
    prev_tokens = 0.0  # the ledger counts from zero
    for i, tick in enumerate(ticks):
        spend = tick.spend_usd if tick.spend_usd is not None else prev_spend
        d_spend = spend - prev_spend
        tokens = tick.output_tokens
        d_tokens = 0.0 if tokens is None else max(tokens - prev_tokens, 0.0)
        start, end = min(prev_at, tick.at), tick.at
        watched = i > 0
        span = end - start
        left_spend = d_spend
        cursor = start
        while True:
            hour = (cursor // HOUR_S) * HOUR_S
            cut = min(hour + HOUR_S, end)
            row = hours.setdefault(hour, HourRow(hour, ZERO, 0.0, 0.0))
            last = cut >= end
            share = 1.0 if span <= 0 else (cut - cursor) / span
            # the last piece takes the remainder, so the pieces add up to the tick exactly
            piece = left_spend if last else d_spend * Decimal(share)
            left_spend -= piece
            row.spend_usd += piece
            row.output_tokens += d_tokens * share
            if watched:
                row.watched_s += cut - cursor
            if last:
                break
            cursor = cut
        prev_at, prev_spend = tick.at, spend
        if tokens is not None:
            prev_tokens = tokens
    return [hours[h] for h in sorted(hours)]


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        # cells come from the record (node names, phases): `cat nodes.csv` must be safe
        writer.writerows([_cell(c) for c in row] for row in rows)


def _cell(value: object) -> object:
    return inert_text(value, MAX_TEXT_CHARS) if isinstance(value, str) else value


def _money(value: Decimal | float | None) -> str:
    # CSVs carry full precision; rounding is the reader's choice
    return "" if value is None else f"{Decimal(value):.6f}"


def nice_range(low: float, high: float, ticks: int = 4) -> tuple[float, float, float]:
    """An axis that fits [low, high]: (bottom, top, step) on round numbers (1, 2, 5 × 10^n)."""
    if not high > low:
        pad = abs(high) * 0.05 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return math.floor(low / step) * step, math.ceil(high / step) * step, step


def _axis_values(bottom: float, top: float, step: float) -> list[float]:
    n = round((top - bottom) / step)
    return [bottom + i * step for i in range(n + 1)]


SPEND_COLOUR, RATE_COLOUR, PHASE_COLOUR, INCIDENT_COLOUR = "#c0392b", "#2471a3", "#7d3c98", "#e67e22"


def chart_svg(
    ticks: Sequence[TickRow], title: str, width: int = 900, height: int = 360,
    incidents: Sequence[Incident] = (),
) -> str:
    """Cumulative spend (left axis) and accepted tokens/s (right axis) over time, each axis
    fitted to its data; phase changes as dashed lines, incident starts as marks on the
    time axis. The legend sits above the plot, never on the lines."""
    pad_l, pad_r, pad_t, pad_b = 90, 110, 56, 44
    shown_title = escape(inert_text(title, MAX_TEXT_CHARS))
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{shown_title}</text>',
        f'<rect x="{pad_l}" y="{pad_t}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>',
    ]
    if len(ticks) < 2:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">not enough ticks</text>')
        out.append("</svg>")
        return "\n".join(out) + "\n"
    t0, t1 = ticks[0].at, ticks[-1].at
    span = max(t1 - t0, 1e-9)
    spend = [(t.at, float(t.spend_usd)) for t in ticks if t.spend_usd is not None]
    rate = [(t.at, t.accepted_tokens_per_s) for t in ticks if t.accepted_tokens_per_s is not None]

    def x(t: float) -> float:
        return pad_l + (t - t0) / span * plot_w

    def y(v: float, bottom: float, top: float) -> float:
        return pad_t + plot_h - (v - bottom) / (top - bottom) * plot_h

    legend_y = pad_t - 10
    if spend:
        values = [v for _, v in spend]
        bottom, top, step = nice_range(min(values), max(values))
        for v in _axis_values(bottom, top, step):
            out.append(f'<line x1="{pad_l}" x2="{pad_l + plot_w}" y1="{y(v, bottom, top):.1f}" '
                       f'y2="{y(v, bottom, top):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{pad_l - 6}" y="{y(v, bottom, top) + 4:.1f}" text-anchor="end" '
                       f'fill="{SPEND_COLOUR}">{escape(fmt_usd(v))}</text>')
        coords = " ".join(f"{x(t):.1f},{y(v, bottom, top):.1f}" for t, v in spend)
        out.append(f'<polyline fill="none" stroke="{SPEND_COLOUR}" stroke-width="1.5" points="{coords}"/>')
        out.append(f'<text x="{pad_l}" y="{legend_y}" fill="{SPEND_COLOUR}">'
                   "— spend (cumulative, left)</text>")
    if rate:
        values = [v for _, v in rate if v is not None]
        bottom, top, step = nice_range(min(values), max(values))
        for v in _axis_values(bottom, top, step):
            out.append(f'<text x="{pad_l + plot_w + 6}" y="{y(v, bottom, top) + 4:.1f}" '
                       f'fill="{RATE_COLOUR}">{escape(fmt_num(v, 0))}</text>')
        coords = " ".join(f"{x(t):.1f},{y(v, bottom, top):.1f}" for t, v in rate if v is not None)
        out.append(f'<polyline fill="none" stroke="{RATE_COLOUR}" stroke-width="1.5" points="{coords}"/>')
        out.append(f'<text x="{pad_l + plot_w}" y="{legend_y}" text-anchor="end" '
                   f'fill="{RATE_COLOUR}">accepted tokens/s (right) —</text>')
    for at, phase in _phase_changes(ticks):
        out.append(f'<line x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{pad_t}" y2="{pad_t + plot_h}" '
                   f'stroke="{PHASE_COLOUR}" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(at) + 3:.1f}" y="{pad_t + 12}" fill="{PHASE_COLOUR}" '
                   f'font-size="11">{escape(clean(phase))}</text>')
    for run in incidents:
        if t0 <= run.start <= t1:
            mark_x, base = x(run.start), pad_t + plot_h
            out.append(f'<path d="M{mark_x:.1f},{base - 8} l-4,8 h8 z" fill="{INCIDENT_COLOUR}">'
                       f"<title>{escape(clean(run.kind))} on {escape(clean(run.node))}</title></path>")
    if incidents:
        out.append(f'<text x="{width / 2}" y="{legend_y}" text-anchor="middle" '
                   f'fill="{INCIDENT_COLOUR}">▲ incident start</text>')
    out += [
        f'<text x="{pad_l}" y="{height - 14}">{escape(iso(t0))}</text>',
        f'<text x="{pad_l + plot_w}" y="{height - 14}" text-anchor="end">{escape(iso(t1))}</text>',
        "</svg>",
    ]
    return "\n".join(out) + "\n"


def _phase_changes(ticks: Sequence[TickRow]) -> list[tuple[float, str]]:
    """(time, new phase) at each change after the first tick, and the first phase."""
    changes = [(ticks[0].at, ticks[0].phase)]
    for before, after in itertools.pairwise(ticks):
        if after.phase != before.phase:
            changes.append((after.at, after.phase))
    return changes if len(changes) > 1 else []


def _facts(rec: Recording) -> list[tuple[str, str]]:
    layout = rec.layout
    facts: list[tuple[str, str]] = []
    if layout is not None:
        roles = Counter(n.role for n in layout.nodes)
        gpus = sum(n.gpus or 0 for n in layout.nodes)
        profiles = sorted({n.engine.profile for n in layout.nodes if n.engine is not None})
        facts += [
            ("cluster", clean(layout.cluster.name)),
            ("layout file", clean(layout.source_path or rec.meta.get("layout_path") or "built-in")),
            ("nodes", f"{len(layout.nodes)} ("
             + ", ".join(f"{count} {role}" for role, count in sorted(roles.items())) + ")"),
            ("GPUs (layout)", str(gpus) if gpus else "—"),
            ("interval", f"{layout.cluster.interval_s:g} s (rates over {layout.cluster.window_s:g} s)"),
            ("engine profile", clean(", ".join(profiles)) if profiles else "—"),
            ("pricing", clean(_pricing_line(rec))),
        ]
    first = rec.ticks[0].at if rec.ticks else None
    last = rec.ticks[-1].at if rec.ticks else None
    started = rec.ledger.started_at if rec.ledger else None
    measured = None if first is None or last is None else last - first
    facts += [
        ("reservation start", iso(started)),
        ("window of measurement", f"{iso(first)} → {iso(last)} ({fmt_span(measured, precise=True)})"),
        ("ticks recorded", str(len(rec.ticks))),
        ("restarts resumed", rec.meta.get("resumes", "0")),
    ]
    return facts


def _pricing_line(rec: Recording) -> str:
    assert rec.layout is not None
    p = rec.layout.pricing
    if p.mode == "owned":
        return (f"owned: hardware ${p.hardware_hour_usd:g}/h + energy (GPU power + "
                f"{p.host_base_power_w:g} W/node) × PUE {p.pue:g} × ${p.kwh_usd:g}/kWh")
    parts = []
    if p.gpu_hour_usd is not None:
        parts.append(f"${p.gpu_hour_usd:g}/GPU-h")
    if p.node_hour_usd is not None:
        parts.append(f"${p.node_hour_usd:g}/node-h")
    if any(n.gpu_hour_usd is not None or n.node_hour_usd is not None for n in rec.layout.nodes):
        parts.append("per-node rates")
    if p.extras_hour_usd:
        parts.append(f"extras ${p.extras_hour_usd:g}/h")
    return "rented: " + (", ".join(parts) or "no rates")


def _span_words(s: SessionView) -> str:
    """Which stretch the token figures (and $/1M, API-equivalent) cover."""
    until = f" to {s.tokens_until}" if s.tokens_until else ""
    if s.reservation_starts_in_s is not None:
        return stretch_words(s) or "—"
    if s.usd_per_million_span == "reservation":
        return f"the whole reservation{until} (the engines' counters began within it)"
    if s.usd_per_million_span == "watched":
        words = stretch_words(s) or "watched"
        return f"{words}: from {s.tokens_since}{until} (spend over it: {fmt_usd(s.span_spend_usd)})"
    return "—"


def _money_lines(s: SessionView | None, tasks: int | None) -> list[tuple[str, str]]:
    if s is None:
        return [("session", "no readable figures")]
    per_task = usd_per(s.spend_usd, tasks) if tasks is not None else s.usd_per_acceptable_task
    return [
        ("spend", fmt_usd(s.spend_usd)),
        ("idle spend", fmt_usd(s.idle_spend_usd)),
        ("cost per hour (last)", fmt_usd(s.cost_per_hour_usd)),
        ("elapsed since reservation start", fmt_span(s.elapsed_s, precise=True)),
        *((("reservation", edge),) if (edge := reservation_words(s)) is not None else ()),
        ("charged but not watched", fmt_span(s.unwatched_s, precise=True)),
        ("token figures cover", _span_words(s)),
        ("accepted output tokens", fmt_num(s.accepted_tokens, 0)),
        ("$ per 1M accepted output tokens", fmt_usd(s.usd_per_million_output_tokens, 4)),
        *_goodput_lines(s),
        ("finished requests", fmt_num(s.requests_finished, 0)),
        ("$ per finished request", fmt_usd(s.usd_per_request, 4)),
        ("$ per acceptable task", fmt_usd(per_task, 4)),
        ("API-equivalent", fmt_usd(s.api_equivalent_usd, 4)),
        ("break-even ratio (spend ÷ API-equivalent)", fmt_num(s.api_break_even_ratio, 2)),
        ("budget", fmt_usd(s.budget_usd)),
        ("budget used", s.budget_label or fmt_pct(s.budget_used_fraction, 1)),
        ("projected spend at the reservation end", fmt_usd(s.projected_spend_usd)),
    ]


def _stretch_goodput_lines(s: SessionView) -> list[tuple[str, str]]:
    """Goodput over the stretch the token figures cover (the `$ per 1M` above): its share
    within the targets and spend per 1M good tokens, or why unknown; nothing without it."""
    low, high = s.span_goodput_share_low, s.span_goodput_share_high
    within = "within the SLO targets (over the same stretch)"
    if low is None or high is None:
        why = s.span_goodput_note
        return [] if why is None else [(within, f"unknown: {clean(why)}")]
    cheap = fmt_usd(s.span_usd_per_million_good_tokens_low, 4)
    dear = fmt_usd(s.span_usd_per_million_good_tokens_high, 4) \
        if s.span_usd_per_million_good_tokens_high is not None else "no bound"
    shares = fmt_pct(low, 1), fmt_pct(high, 1)
    out = [
        (within, shares[0] if low == high else "–".join(shares)),
        ("$ per 1M good output tokens (over the same stretch)",
         cheap if cheap == dear else f"{cheap}–{dear}"),
    ]
    if s.span_goodput_note:
        out.append(("goodput bounds (over the stretch)", clean(s.span_goodput_note)))
    return out


def _goodput_lines(s: SessionView) -> list[tuple[str, str]]:
    """The session's goodput: over the stretch, then the last frame's
    (docs/money.md#the-cost-of-a-good-token): a range where a histogram bucket straddles a
    target, with the reason; nothing without [slo] figures."""
    stretch = _stretch_goodput_lines(s)
    if s.goodput_share_low is None or s.goodput_share_high is None:
        return stretch
    low, high = fmt_pct(s.goodput_share_low, 1), fmt_pct(s.goodput_share_high, 1)
    cheap = fmt_usd(s.usd_per_million_good_tokens_low, 4)
    dear = fmt_usd(s.usd_per_million_good_tokens_high, 4) if s.usd_per_million_good_tokens_high is not None \
        else "no bound"
    out = [
        ("within the SLO targets (last window)", low if low == high else f"{low}–{high}"),
        ("$ per 1M good output tokens (last window)", cheap if cheap == dear else f"{cheap}–{dear}"),
        ("$ per 1M output tokens (last window)", fmt_usd(s.usd_per_million_output_tokens_now, 4)),
    ]
    if s.goodput_note:
        out.append(("goodput bounds", clean(s.goodput_note)))
    return stretch + out


def write_report(rec: Recording, out_dir: Path, acceptable_tasks: int | None = None) -> list[Path]:
    """Write report.md, phases.csv, nodes.csv, incidents.csv, timeline.csv, hours.csv, spend.svg and
    scoreboard.svg; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    session = rec.final_session()
    ledger = rec.ledger
    written: list[Path] = []

    phases = out_dir / "phases.csv"
    if ledger is not None:
        phase_rows = [
            (p, f"{s:.3f}", _money(ledger.spend_by_phase.get(p, ZERO)))
            for p, s in ledger.seconds_by_phase.items()
        ]
    else:  # the ledger row is damaged: the last readable snapshot's figures
        phase_rows = [
            (p.phase, f"{p.seconds:.3f}", _money(p.spend_usd))
            for p in (session.spend_by_phase if session else [])
        ]
    _write_csv(phases, ("phase", "seconds", "spend_usd"), phase_rows)
    written.append(phases)

    found = scan(rec)
    nodes = out_dir / "nodes.csv"
    _write_csv(nodes, NODE_COLUMNS, _node_rows(rec, found))
    written.append(nodes)

    incidents = out_dir / "incidents.csv"
    _write_csv(incidents, INCIDENT_COLUMNS, [
        (r.node, r.kind, r.severity, iso_utc(r.start), iso_utc(r.end) if r.end is not None else "",
         f"{r.duration_s(found.end):.0f}", _money(r.usd_at_stake(found.end)), r.detail)
        for r in found.incidents
    ])
    written.append(incidents)

    hours = out_dir / "hours.csv"
    started = ledger.started_at if ledger else (rec.ticks[0].at if rec.ticks else 0.0)
    hour_rows = split_by_hour(started, rec.ticks)
    _write_csv(
        hours,
        ("hour_start_utc", "spend_usd", "output_tokens", "watched_s"),
        [(dt.datetime.fromtimestamp(h.hour_start, dt.UTC).isoformat(), _money(h.spend_usd),
          round(h.output_tokens), f"{h.watched_s:.3f}") for h in hour_rows],
    )
    written.append(hours)

    title = rec.layout.cluster.name if rec.layout else rec.path.name
    chart = out_dir / "spend.svg"
    chart.write_text(
        chart_svg(rec.ticks, f"{title}: spend and accepted tokens/s", incidents=found.incidents),
        encoding="utf-8",
    )
    written.append(chart)

    snapshots = sampled_snapshots(rec)
    events = recorded_timeline(snapshots, rec.ticks)
    points = live_points(snapshots)
    last = snapshots[-1] if snapshots else None
    board = out_dir / "scoreboard.svg"
    board.write_text(scoreboard_svg(points, last, f"{title}: throughput vs interactivity"), encoding="utf-8")
    written.append(board)

    timeline = out_dir / "timeline.csv"
    _write_csv(timeline, TIMELINE_COLUMNS, timeline_rows(events))
    written.append(timeline)

    md = out_dir / "report.md"
    recorded_s = rec.ticks[-1].at - rec.ticks[0].at if rec.ticks else None
    md.write_text(
        _markdown(rec, session, acceptable_tasks, hour_rows, found,
                  scoreboard_markdown(points, last, recorded_s),
                  timeline_markdown(events)),
        encoding="utf-8",
    )
    written.insert(0, md)
    return written


def _table(rows: Sequence[tuple[str, str]], head: tuple[str, str] = ("", "")) -> list[str]:
    return [f"| {head[0]} | {head[1]} |", "|---|---|", *[f"| {a} | {b} |" for a, b in rows], ""]


def _markdown(
    rec: Recording, session: SessionView | None, tasks: int | None, hours: Sequence[HourRow],
    found: Scan,
    scoreboard: Sequence[str] = (),
    timeline: Sequence[str] = (),
) -> str:
    title = clean(rec.layout.cluster.name) if rec.layout else clean(rec.path.name)
    lines = [f"# Session report: {title}", "", f"Recording: `{clean(rec.path)}`", ""]
    if rec.problems:
        lines += ["**The recording is damaged; what follows is what could be read:**", ""]
        lines += [f"- {clean(p)}" for p in rec.problems] + [""]
    lines += ["## Trial", "", *_table(_facts(rec), ("fact", "value"))]
    lines += ["## Money", "", *_table(_money_lines(session, tasks), ("figure", "value"))]
    if session is not None:
        prices = session.api_prices or (describe(rec.layout.pricing.api) if rec.layout else "")
        lines += [f"API-equivalent priced with {clean(prices)}; peak 01:00–04:00 and 06:00–10:00 UTC "
                  "on weekdays, off-peak otherwise."]
        if session.api_cache_note:
            lines += [f"Prompt tokens: {clean(session.api_cache_note)}."]
        lines.append("")
    if rec.ledger is not None and rec.ledger.seconds_by_phase:
        led = rec.ledger
        lines += ["## Spend by phase", "", "| phase | time | spend |", "|---|---|---|"]
        lines += [
            f"| {clean(p)} | {fmt_span(s, precise=True)} "
            f"| {fmt_usd(float(led.spend_by_phase.get(p, ZERO)))} |"
            for p, s in led.seconds_by_phase.items()
        ]
        lines.append("")
    lines += _incident_lines(found)
    lines += list(timeline)
    if hours:
        lines += ["## Spend by hour", "", "| hour (UTC) | spend | output tokens |", "|---|---|---|"]
        lines += [f"| {iso(h.hour_start)} | {fmt_usd(float(h.spend_usd))} | {fmt_num(h.output_tokens, 0)} |"
                  for h in hours]
        lines.append("")
    lines += list(scoreboard)
    lines += ["Files: `phases.csv`, `nodes.csv`, `incidents.csv`, `timeline.csv`, `hours.csv`, "
              "charts `spend.svg` and `scoreboard.svg`.", ""]
    return "\n".join(lines)


NODE_COLUMNS = ("node", "role", "gpus", "spend_usd", "idle_spend_usd", "output_tokens",
                "mean_util_pct", "verdict_minutes")
INCIDENT_COLUMNS = ("node", "verdict", "severity", "start_utc", "end_utc", "duration_s",
                    "usd_at_stake", "detail")
# the Markdown table lists the costliest incidents; incidents.csv has every one
MAX_INCIDENT_LINES = 50


def _node_rows(rec: Recording, found: Scan) -> list[tuple[object, ...]]:
    """One row per node: the ledger's spend, the rest from the recorded snapshots. Work
    billed to no node (extras) gets its own row only when there is some."""
    config = {n.name: n for n in rec.layout.nodes if n.name is not None} if rec.layout else {}
    spend = dict(rec.ledger.spend_by_node) if rec.ledger is not None else {}
    extras = spend.pop(CLUSTER_ROW, ZERO)
    rows: list[tuple[object, ...]] = []
    for name in sorted(set(spend) | set(found.nodes) | set(config)):
        node = config.get(name)
        totals = found.nodes.get(name)
        util = totals.mean_util_pct if totals else None
        rows.append((
            name, node.role if node else "", node.gpus if node and node.gpus is not None else "",
            _money(spend.get(name)),
            _money(totals.idle_spend_usd) if totals else "",
            round(totals.output_tokens) if totals else "",
            "" if util is None else f"{util:.1f}",
            f"{totals.verdict_s / 60:.1f}" if totals else "",
        ))
    if abs(extras) >= Decimal("0.005"):  # float dust from the split is not a bill
        rows.append(("(extras)", "", "", _money(extras), "", "", "", ""))
    return rows


def _incident_lines(found: Scan) -> list[str]:
    lines = ["## Incidents", ""]
    if not found.incidents:
        return [*lines, "No verdict was established during the recording.", ""]
    costly = sorted(found.incidents, key=lambda r: -(r.usd_at_stake(found.end) or 0.0))
    shown = sorted(costly[:MAX_INCIDENT_LINES], key=lambda r: (r.start, r.node))
    lines += ["| verdict | node | start | end | duration | $ at stake |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {clean(r.kind)} | {clean(r.node)} | {iso(r.start)} | "
        f"{iso(r.end) if r.end is not None else 'still open'} | "
        f"{fmt_span(r.duration_s(found.end), precise=True)} | {fmt_usd(r.usd_at_stake(found.end))} |"
        for r in shown
    ]
    if len(found.incidents) > len(shown):
        lines.append(f"\n{len(found.incidents) - len(shown)} cheaper incidents in `incidents.csv`.")
    if found.snapshots_read < found.ticks:
        lines.append(f"\nFrom {found.snapshots_read:,} of {found.ticks:,} recorded snapshots, evenly spaced.")
    return [*lines, ""]
