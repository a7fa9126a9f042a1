"""`infertop report FILE`: a recording → Markdown summary, CSVs, and an SVG chart.

The totals are the ledger's own (the figures the live session showed), never re-summed
from rounded per-tick values; the per-hour split divides each tick's charge across the
hours it spans, in proportion to time (the rate is constant within a tick), so the hours
add up to the total exactly.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from xml.sax.saxutils import escape

from collectors.safe_text import inert_text
from monitor.evaluation.api_price import describe
from monitor.evaluation.ledger import CLUSTER_ROW, ZERO
from monitor.evaluation.money import usd_per
from monitor.format import fmt_num, fmt_pct, fmt_span, fmt_usd
from monitor.record.report_scoreboard import (
    live_points,
    sampled_snapshots,
    scoreboard_markdown,
    scoreboard_svg,
)
from monitor.record.store import Recording, TickRow
from monitor.snapshot import SessionView

HOUR_S = 3600.0
# a report line holds a path, a cluster name, a price table: generous, but bounded
MAX_TEXT_CHARS = 500


def clean(text: object) -> str:
    """Text from a layout or a record, inert (`inert_text`) and safe in a Markdown table."""
    return inert_text(text, MAX_TEXT_CHARS).replace("|", "\\|")


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


def chart_svg(ticks: Sequence[TickRow], title: str, width: int = 800, height: int = 320) -> str:
    """Cumulative spend (left axis) and accepted tokens/s (right axis) over time."""
    pad_l, pad_r, pad_t, pad_b = 70, 70, 36, 40
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

    def series(points: list[tuple[float, float]], top: float, colour: str) -> None:
        top = top if top > 0 else 1.0
        coords = " ".join(f"{x(t):.1f},{pad_t + plot_h - v / top * plot_h:.1f}" for t, v in points)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>')

    spend_top = max((v for _, v in spend), default=0.0)
    rate_top = max((v for _, v in rate if v is not None), default=0.0)
    if spend:
        series(spend, spend_top, "#c0392b")
    if rate:
        series([(t, v) for t, v in rate if v is not None], rate_top, "#2471a3")
    out += [
        f'<text x="{pad_l - 6}" y="{pad_t + 4}" text-anchor="end" fill="#c0392b">'
        f"{escape(fmt_usd(spend_top))}</text>",
        f'<text x="{pad_l - 6}" y="{pad_t + plot_h}" text-anchor="end" fill="#c0392b">$0</text>',
        f'<text x="{pad_l + plot_w + 6}" y="{pad_t + 4}" fill="#2471a3">{fmt_num(rate_top, 0)} tok/s</text>',
        f'<text x="{pad_l + plot_w + 6}" y="{pad_t + plot_h}" fill="#2471a3">0</text>',
        f'<text x="{pad_l}" y="{height - 12}">{escape(iso(t0))}</text>',
        f'<text x="{pad_l + plot_w}" y="{height - 12}" text-anchor="end">{escape(iso(t1))}</text>',
        f'<text x="{pad_l + 8}" y="{pad_t + 16}" fill="#c0392b">spend (cumulative)</text>',
        f'<text x="{pad_l + 8}" y="{pad_t + 32}" fill="#2471a3">accepted tokens/s</text>',
        "</svg>",
    ]
    return "\n".join(out) + "\n"


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


def _money_lines(s: SessionView | None, tasks: int | None) -> list[tuple[str, str]]:
    if s is None:
        return [("session", "no readable figures")]
    per_task = usd_per(s.spend_usd, tasks) if tasks is not None else s.usd_per_acceptable_task
    return [
        ("spend", fmt_usd(s.spend_usd)),
        ("idle spend", fmt_usd(s.idle_spend_usd)),
        ("cost per hour (last)", fmt_usd(s.cost_per_hour_usd)),
        ("elapsed since reservation start", fmt_span(s.elapsed_s, precise=True)),
        ("charged but not watched", fmt_span(s.unwatched_s, precise=True)),
        ("accepted output tokens", fmt_num(s.accepted_tokens, 0)),
        ("$ per 1M accepted output tokens", fmt_usd(s.usd_per_million_output_tokens, 4)),
        ("finished requests", fmt_num(s.requests_finished, 0)),
        ("$ per finished request", fmt_usd(s.usd_per_request, 4)),
        ("$ per acceptable task", fmt_usd(per_task, 4)),
        ("API-equivalent", fmt_usd(s.api_equivalent_usd, 4)),
        ("break-even ratio (spend ÷ API-equivalent)", fmt_num(s.api_break_even_ratio, 2)),
        ("budget", fmt_usd(s.budget_usd)),
        ("budget used", fmt_pct(s.budget_used_fraction, 1)),
    ]


def write_report(rec: Recording, out_dir: Path, acceptable_tasks: int | None = None) -> list[Path]:
    """Write report.md, phases.csv, nodes.csv, hours.csv, spend.svg and scoreboard.svg;
    return their paths."""
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

    nodes = out_dir / "nodes.csv"
    config = {n.name: n for n in rec.layout.nodes} if rec.layout else {}
    node_rows = []
    if ledger is not None:
        for name, spend in sorted(
            ledger.spend_by_node.items(), key=lambda kv: (kv[0] == CLUSTER_ROW, kv[0])
        ):
            node = config.get(name)
            gpus = node.gpus if node and node.gpus is not None else ""
            node_rows.append((name, node.role if node else "", gpus, _money(spend)))
    _write_csv(nodes, ("node", "role", "gpus", "spend_usd"), node_rows)
    written.append(nodes)

    hours = out_dir / "hours.csv"
    started = ledger.started_at if ledger else (rec.ticks[0].at if rec.ticks else 0.0)
    hour_rows = split_by_hour(started, rec.ticks)
    _write_csv(
        hours,
        ("hour_start_utc", "spend_usd", "output_tokens", "watched_s"),
        [(dt.datetime.fromtimestamp(h.hour_start, dt.UTC).isoformat(), _money(h.spend_usd),
          f"{h.output_tokens:.3f}", f"{h.watched_s:.3f}") for h in hour_rows],
    )
    written.append(hours)

    title = rec.layout.cluster.name if rec.layout else rec.path.name
    chart = out_dir / "spend.svg"
    chart.write_text(chart_svg(rec.ticks, f"{title}: spend and accepted tokens/s"), encoding="utf-8")
    written.append(chart)

    snapshots = sampled_snapshots(rec)
    points = live_points(snapshots)
    last = snapshots[-1] if snapshots else None
    board = out_dir / "scoreboard.svg"
    board.write_text(scoreboard_svg(points, last, f"{title}: throughput vs interactivity"), encoding="utf-8")
    written.append(board)

    md = out_dir / "report.md"
    md.write_text(_markdown(rec, session, acceptable_tasks, hour_rows, scoreboard_markdown(points, last)),
                  encoding="utf-8")
    written.insert(0, md)
    return written


def _table(rows: Sequence[tuple[str, str]], head: tuple[str, str] = ("", "")) -> list[str]:
    return [f"| {head[0]} | {head[1]} |", "|---|---|", *[f"| {a} | {b} |" for a, b in rows], ""]


def _markdown(
    rec: Recording, session: SessionView | None, tasks: int | None, hours: Sequence[HourRow],
    scoreboard: Sequence[str] = (),
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
    if hours:
        lines += ["## Spend by hour", "", "| hour (UTC) | spend | output tokens |", "|---|---|---|"]
        lines += [f"| {iso(h.hour_start)} | {fmt_usd(float(h.spend_usd))} | {fmt_num(h.output_tokens, 0)} |"
                  for h in hours]
        lines.append("")
    lines += list(scoreboard)
    lines += ["Files: `phases.csv`, `nodes.csv`, `hours.csv`, charts `spend.svg` and `scoreboard.svg`.", ""]
    return "\n".join(lines)
