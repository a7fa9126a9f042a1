"""The report's scoreboard: the live decode point over the session beside the reference
points (a chart, `scoreboard.svg`), and the latency and cache figures of the last
readable snapshot, per pool.

Read from the recorded snapshots, at most `MAX_SNAPSHOTS` of them evenly spaced: a
long recording has tens of thousands of ticks, and the chart needs a trail, not each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from infertop.monitor.format import fmt_latency, fmt_num, fmt_pct, fmt_rate_gbps, inert_text
from infertop.monitor.record.recording import Recording
from infertop.monitor.snapshot import RollupView, Snapshot

MAX_SNAPSHOTS = 240
LATENCIES = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E"), ("queue", "queue"))


@dataclass(frozen=True)
class LivePoint:
    at: float
    per_user: float
    per_gpu: float
    full_per_gpu: float | None


def sampled_snapshots(rec: Recording, limit: int = MAX_SNAPSHOTS) -> list[Snapshot]:
    ticks = rec.ticks
    if not ticks:
        return []
    step = max(1, len(ticks) // limit)
    chosen = list(ticks[::step])
    if chosen[-1] is not ticks[-1]:
        chosen.append(ticks[-1])
    out = []
    for tick in chosen:
        snap = rec.snapshot(tick.id)
        if snap is not None:
            out.append(snap)
    return out


def live_points(snapshots: Sequence[Snapshot]) -> list[LivePoint]:
    out = []
    for snap in snapshots:
        s = snap.session
        if s.output_tokens_per_s_per_user is None or s.output_tokens_per_s_per_gpu is None:
            continue
        out.append(LivePoint(s.elapsed_s, s.output_tokens_per_s_per_user, s.output_tokens_per_s_per_gpu,
                             s.full_acceptance_tokens_per_s_per_gpu))
    return out


def scoreboard_svg(points: Sequence[LivePoint], last: Snapshot | None, title: str,
                   width: int = 640, height: int = 420) -> str:
    """Tokens/s per GPU against tokens/s per user: the references (◆), the live point's
    trail over the session and its last position (● accepted, ○ full acceptance)."""
    pad_l, pad_r, pad_t, pad_b = 80, 30, 40, 50
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    refs = list(last.cluster.reference_points) if last is not None else []
    xs = [p.per_user for p in points] + [r.output_tokens_per_s_per_user for r in refs]
    ys = [p.per_gpu for p in points] + [p.full_per_gpu for p in points if p.full_per_gpu is not None]
    ys += [r.output_tokens_per_s_per_gpu for r in refs]
    x_top = (max(xs) if xs else 1.0) * 1.15 or 1.0
    y_top = (max(ys) if ys else 1.0) * 1.15 or 1.0

    def x(v: float) -> float:
        return pad_l + v / x_top * plot_w

    def y(v: float) -> float:
        return pad_t + plot_h - v / y_top * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">'
        f"{escape(inert_text(title, 120))}</text>",
        f'<rect x="{pad_l}" y="{pad_t}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>',
        f'<text x="{pad_l - 6}" y="{pad_t + 4}" text-anchor="end">{fmt_num(y_top, 0)}</text>',
        f'<text x="{pad_l - 6}" y="{pad_t + plot_h}" text-anchor="end">0</text>',
        f'<text x="{pad_l + plot_w}" y="{pad_t + plot_h + 16}" text-anchor="end">{fmt_num(x_top, 0)}</text>',
        f'<text x="{pad_l + plot_w / 2}" y="{height - 12}" text-anchor="middle">'
        "output tokens/s per user</text>",
        f'<text x="16" y="{pad_t + plot_h / 2}" transform="rotate(-90 16 {pad_t + plot_h / 2})" '
        'text-anchor="middle">output tokens/s per GPU</text>',
    ]
    for r in refs:
        label = escape(inert_text(f"{r.label} ({r.accounting})", 60))
        rx, ry = x(r.output_tokens_per_s_per_user), y(r.output_tokens_per_s_per_gpu)
        out.append(f'<rect class="reference" x="{rx - 5:.1f}" y="{ry - 5:.1f}" width="10" height="10" '
                   f'transform="rotate(45 {rx:.1f} {ry:.1f})" fill="#d4ac0d"/>')
        out.append(f'<text x="{rx + 10:.1f}" y="{ry + 4:.1f}" fill="#7d6608">{label}</text>')
    if points:
        trail = " ".join(f"{x(p.per_user):.1f},{y(p.per_gpu):.1f}" for p in points)
        out.append('<polyline class="trail" fill="none" stroke="#82e0aa" stroke-width="1" '
                   f'points="{trail}"/>')
        end = points[-1]
        cx = f"{x(end.per_user):.1f}"
        if end.full_per_gpu is not None:
            out.append(f'<circle class="full-acceptance" cx="{cx}" cy="{y(end.full_per_gpu):.1f}" '
                       'r="5" fill="none" stroke="#2e86c1" stroke-width="2"/>')
        out.append(f'<circle class="live" cx="{cx}" cy="{y(end.per_gpu):.1f}" r="5" fill="#1e8449"/>')
    out += [
        f'<text x="{pad_l + 8}" y="{pad_t + 16}" fill="#1e8449">'
        "● accepted (live, trail over the session)</text>",
        f'<text x="{pad_l + 8}" y="{pad_t + 32}" fill="#2e86c1">○ full acceptance (the references\' '
        "convention)</text>",
        "</svg>",
    ]
    return "\n".join(out) + "\n"


def _latency_row(label: str, r: RollupView) -> str:
    cells = [
        fmt_latency(getattr(r, f"{name}_{p}_s"), r.latency_bounds_s.get(f"{name}_{p}"))
        for name, _ in LATENCIES for p in ("p50", "p99")
    ]
    return f"| {label} | " + " | ".join(cells) + " |"


def latency_blank_reason(last: Snapshot, recorded_s: float | None) -> str | None:
    """Why every pool's latency cells are blank, when they are: the window is longer than
    the record (its engines' buckets were not read twice within one), and what the nodes
    say (the live TUI's scoreboard shows the same notes on their rows)."""
    pools = [*last.cluster.roles.values(), last.cluster.total]
    if any(getattr(r, f"{name}_{p}_s") is not None for r in pools for name, _ in LATENCIES
           for p in ("p50", "p99")):
        return None
    reasons = []
    if recorded_s is not None and recorded_s < last.window_s:
        reasons.append(f"the window ({fmt_num(last.window_s, 0)} s) is longer than the record "
                       f"({fmt_num(recorded_s, 1)} s)")
    notes = sorted({n.engine.latency_note for n in last.nodes
                    if n.engine is not None and n.engine.latency_note})
    reasons += [inert_text(note, 80) for note in notes[:3]]
    if not reasons:
        reasons.append("no engine reported latency histograms")
    return "Latency is blank: " + "; ".join(reasons) + "."


def scoreboard_markdown(points: Sequence[LivePoint], last: Snapshot | None,
                        recorded_s: float | None = None) -> list[str]:
    lines = ["## Scoreboard", ""]
    if last is None:
        return [*lines, "No readable snapshot.", ""]
    s = last.session
    lines += [
        f"Live point ({inert_text(s.live_point_pool or 'decode', 20)} pool, last tick): "
        f"{fmt_num(s.output_tokens_per_s_per_gpu, 0)} accepted tokens/s per GPU "
        f"({fmt_num(s.full_acceptance_tokens_per_s_per_gpu, 0)} with full acceptance), "
        f"{fmt_num(s.output_tokens_per_s_per_user, 0)} tokens/s per user; "
        f"{len(points)} points of its trail in `scoreboard.svg`.",
        "",
        "| point | tok/s per GPU | tok/s per user | counted as |",
        "|---|---|---|---|",
        f"| live (accepted) | {fmt_num(s.output_tokens_per_s_per_gpu, 0)} "
        f"| {fmt_num(s.output_tokens_per_s_per_user, 0)} | accepted |",
        f"| live (full acceptance) | {fmt_num(s.full_acceptance_tokens_per_s_per_gpu, 0)} | — "
        "| full acceptance |",
    ]
    for r in last.cluster.reference_points:
        lines.append(f"| {inert_text(r.label, 40)} | {fmt_num(r.output_tokens_per_s_per_gpu, 0)} "
                     f"| {fmt_num(r.output_tokens_per_s_per_user, 0)} | {inert_text(r.accounting, 20)} |")
    lines += ["", f"References: {inert_text(last.cluster.reference_source or 'none', 200)}.", ""]
    head = " | ".join(f"{label} p50 | {label} p99" for _, label in LATENCIES)
    lines += ["Latency over the last window (interpolated within the histogram bucket shown):", "",
              f"| pool | {head} |", "|---" * (1 + 2 * len(LATENCIES)) + "|"]
    pools = {**{f"{role} pool": v for role, v in last.cluster.roles.items()}, "cluster": last.cluster.total}
    lines += [_latency_row(inert_text(label, 40), r) for label, r in pools.items()]
    blank = latency_blank_reason(last, recorded_s)
    if blank is not None:
        lines += ["", blank]
    lines += ["", "| pool | prefix-cache hit | preemptions/s | KV transfer |", "|---|---|---|---|"]
    lines += [f"| {inert_text(label, 40)} | {fmt_pct(r.prefix_cache_hit_rate, 1)} "
              f"| {fmt_num(r.preemptions_per_s, 2)} | {fmt_rate_gbps(r.kv_transfer_bytes_per_s)} |"
              for label, r in pools.items()]
    lines.append("")
    return lines
