"""The scoreboard as text: the throughput / interactivity plot, its tables and the
overview's one-line summary. Draws only what the snapshot carries."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from infertop.monitor.format import (
    UNKNOWN,
    fmt_clock,
    fmt_latency,
    fmt_num,
    fmt_pct,
    fmt_rate_gbps,
    fmt_scoreboard_p99,
    fmt_usd,
)
from infertop.monitor.snapshot import EngineView, NodeView, RollupView, SessionView, Snapshot
from infertop.tui.text import inert

Point = tuple[float, float]  # (tokens/s per user, tokens/s per GPU)
LATENCIES = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E"), ("queue", "QUEUE"))
REFERENCE, LIVE, FULL, TRAIL = "◆", "●", "○", "·"


def _axis(value: float) -> str:
    return f"{value / 1000:.0f}k" if value >= 10_000 else f"{value:,.0f}"


def scatter(
    references: Sequence[tuple[str, Point]],
    live: Point | None,
    full: Point | None,
    trail: Sequence[Point],
    width: int = 44,
    height: int = 12,
) -> Text:
    """Tokens/s per GPU (up) against tokens/s per user (across): the reference points
    labelled, the live point (● accepted, ○ full acceptance) and its trail (·)."""
    points = [p for _, p in references] + [p for p in (live, full) if p is not None] + list(trail)
    x_max = max((p[0] for p in points), default=1.0) * 1.15 or 1.0
    y_max = max((p[1] for p in points), default=1.0) * 1.15 or 1.0
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]

    def put(p: Point, mark: str, style: str, label: str = "") -> None:
        col = min(width - 1, max(0, round(p[0] / x_max * (width - 1))))
        row = min(height - 1, max(0, height - 1 - round(p[1] / y_max * (height - 1))))
        grid[row][col] = (mark, style)
        for i, ch in enumerate(label[: width - col - 2]):
            grid[row][col + 2 + i] = (ch, style)

    for p in trail:
        put(p, TRAIL, "grey50")
    for label, p in references:
        put(p, REFERENCE, "bold yellow", label)
    if full is not None:
        put(full, FULL, "bold cyan")
    if live is not None:
        put(live, LIVE, "bold green")
    out = Text(no_wrap=True, end="")
    y_label = len(_axis(y_max))
    for r, line in enumerate(grid):
        tick = _axis(y_max) if r == 0 else ("0" if r == height - 1 else "")
        out.append(f"{tick:>{y_label}} │", "grey50")
        for ch, style in line:
            out.append(ch, style)
        out.append("\n")
    out.append(" " * y_label + " └" + "─" * width + "\n", "grey50")
    out.append(" " * (y_label + 2) + "0" + f"{_axis(x_max):>{width - 1}}" + "\n", "grey50")
    out.append(" " * (y_label + 2) + "tok/s per GPU ↑ · tok/s per user →", "grey50")
    return out


def whole_figures(table: Table) -> Table:
    """A narrow screen squeezes the table's label columns (cut with "…"), never its
    figures: a right-justified column is at least as wide as its widest figure ("1,…" and
    "(750–1,0…" were figures cut short); a figure's bucket may go to the next line."""
    for column in table.columns:
        if column.justify == "right":
            parts = (part for cell in column.cells for line in str(cell).splitlines()
                     for part in _UNBROKEN.split(line))
            column.min_width = max(column.min_width or 0, max((len(p) for p in parts), default=0))
    return table


_UNBROKEN = re.compile(r"\s+(?=\()")  # "388.6 ms (250–500)": the value, then its bucket


def throughput_table(snapshot: Snapshot) -> Table:
    """The live point, accepted and full acceptance side by side, and the references."""
    s = snapshot.session
    c = snapshot.cluster
    table = Table(box=box.SIMPLE_HEAD, header_style="bold grey70", expand=False)
    for col in ("", "TOK/S PER GPU", "TOK/S PER USER", "COUNTED AS"):
        table.add_column(col, justify="left" if not col or col == "COUNTED AS" else "right")
    pool = inert(s.live_point_pool or "decode", max_len=20).plain
    table.add_row(Text(f"{LIVE} live ({pool} pool)", "bold green"),
                  fmt_num(s.output_tokens_per_s_per_gpu, 0), fmt_num(s.output_tokens_per_s_per_user, 0),
                  "accepted")
    table.add_row(Text(f"{FULL} live ({pool} pool)", "bold cyan"),
                  fmt_num(s.full_acceptance_tokens_per_s_per_gpu, 0), UNKNOWN, "full acceptance")
    for p in c.reference_points:
        table.add_row(Text(f"{REFERENCE} {inert(p.label, max_len=30).plain}", "bold yellow"),
                      fmt_num(p.output_tokens_per_s_per_gpu, 0), fmt_num(p.output_tokens_per_s_per_user, 0),
                      inert(p.accounting, max_len=20).plain)
    return whole_figures(table)


def node_points_table(snapshot: Snapshot) -> Table:
    """Each engine's own point: tokens/s per GPU (accepted, full acceptance) and per user."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold grey70", expand=False)
    for col in ("WHERE", "TOK/S PER GPU", "FULL ACC. PER GPU", "TOK/S PER USER", "RUNNING (MEAN)"):
        table.add_column(col, justify="left" if col == "WHERE" else "right")
    for role, pool in snapshot.cluster.roles.items():
        table.add_row(f"{inert(role, max_len=20).plain} pool", fmt_num(pool.output_tokens_per_s_per_gpu, 0),
                      fmt_num(pool.full_acceptance_tokens_per_s_per_gpu, 0),
                      fmt_num(pool.output_tokens_per_s_per_user, 0), fmt_num(pool.requests_running, 0),
                      style="bold")
    for node in snapshot.nodes:
        e = node.engine
        if e is None:
            continue
        table.add_row(inert(node.name, max_len=40), fmt_num(e.output_tokens_per_s_per_gpu, 0),
                      fmt_num(e.full_acceptance_tokens_per_s_per_gpu, 0),
                      fmt_num(e.output_tokens_per_s_per_user, 0), fmt_num(e.requests_running_mean, 1))
    return whole_figures(table)


def _latency_cells(view: RollupView | EngineView) -> list[str]:
    cells = []
    for name, _ in LATENCIES:
        for p in ("p50", "p99"):
            value = getattr(view, f"{name}_{p}_s")
            cells.append(fmt_latency(value, view.latency_bounds_s.get(f"{name}_{p}")))
    return cells


def latency_table(snapshot: Snapshot) -> Table:
    table = Table(box=box.SIMPLE_HEAD, header_style="bold grey70", expand=False)
    table.add_column("WHERE")
    for _, label in LATENCIES:
        table.add_column(f"{label} p50", justify="right")
        table.add_column(f"{label} p99", justify="right")
    table.add_column("SLO", justify="right")
    c = snapshot.cluster
    for role, pool in c.roles.items():
        label = f"{inert(role, max_len=20).plain} pool"
        table.add_row(label, *_latency_cells(pool), _slo(pool), style="bold")
    for node in snapshot.nodes:
        if node.engine is None:
            continue
        slo = _slo(node.engine)
        if node.engine.latency_note and slo == UNKNOWN:
            slo = inert(node.engine.latency_note, max_len=40).plain  # why the row is empty
        table.add_row(inert(node.name, max_len=40), *_latency_cells(node.engine), slo)
    return whole_figures(table)


def _slo(view: RollupView | EngineView) -> str:
    """The share within each target, as bounds where a bucket straddles it (`85.0–95.0%`)."""
    parts = []
    for label, low, high in (("TTFT", view.slo_ttft_attainment, view.slo_ttft_attainment_high),
                             ("ITL", view.slo_itl_attainment, view.slo_itl_attainment_high)):
        if low is None:
            continue
        share = fmt_pct(low, 1)
        if high is not None and high != low:
            share = f"{low * 100:.1f}–{fmt_pct(high, 1)}"
        parts.append(f"{label} {share}")
    return " ".join(parts) or UNKNOWN


def _ib(node: NodeView) -> str:
    rx = node.rx_bytes_per_s
    tx = node.tx_bytes_per_s
    if rx is None and tx is None:
        return UNKNOWN
    return f"{fmt_rate_gbps(rx)} in / {fmt_rate_gbps(tx)} out"


def cache_table(snapshot: Snapshot) -> Table:
    """Cache and the disaggregated path per node, beside the node's network traffic."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold grey70", expand=False)
    for col in ("NODE", "ROLE", "PREFIX HIT", "EXTERNAL HIT", "PREEMPT/S", "KV XFER", "XFER TIME",
                "XFER FAIL/S", "NETWORK", "EXPERT BALANCE"):
        table.add_column(col, justify="left" if col in ("NODE", "ROLE", "NETWORK") else "right")
    for node in snapshot.nodes:
        e = node.engine
        if e is None:
            continue
        xfer_time = e.kv_transfer_mean_s if e.kv_transfer_mean_s is not None else e.kv_transfer_latency_s
        kv = e.kv_transfer_bytes_per_s
        if kv is None:
            kv = e.kv_transfer_speed_bytes_per_s
        table.add_row(
            inert(node.name, max_len=40), inert(node.role, max_len=12),
            fmt_pct(e.prefix_cache_hit_rate, 1), fmt_pct(e.external_prefix_cache_hit_rate, 1),
            fmt_num(e.preemptions_per_s, 2), fmt_rate_gbps(kv), fmt_latency(xfer_time),
            fmt_num(e.kv_transfer_failures_per_s, 2), _ib(node), fmt_pct(e.expert_balancedness, 0),
        )
    return whole_figures(table)


def money_text(s: SessionView) -> Text:
    """Break-even, price window, projection and energy, where the snapshot has them."""
    out = Text()
    if s.breakeven_output_tokens_per_s is not None:
        now = s.accepted_tokens_per_s
        out.append("break-even ")
        out.append(f"{fmt_num(s.breakeven_output_tokens_per_s, 0)} tok/s", "bold")
        out.append(f" needed, {fmt_num(now, 0)} now")
        if s.price_window is not None:
            out.append(f" ({inert(s.price_window, max_len=20).plain} price")
            if s.price_window_flips_at is not None:
                out.append(f", flips {fmt_clock(s.price_window_flips_at)}")
            out.append(")")
        if s.api_break_even_ratio is not None:
            out.append(f"   spend ÷ API {s.api_break_even_ratio:.2f}×")
        out.append("\n")
    if s.projected_spend_usd is not None:
        out.append(f"projected spend {fmt_usd(s.projected_spend_usd)}")
        if s.budget_holds is not None:
            out.append("  budget holds" if s.budget_holds else "  budget will not hold",
                       "green" if s.budget_holds else "bold red")
        out.append("\n")
    if s.energy_kwh is not None:
        out.append(f"energy {fmt_num(s.energy_kwh, 2)} kWh")
        if s.joules_per_output_token is not None:
            out.append(f"  {fmt_num(s.joules_per_output_token, 2)} J per output token")
        out.append("\n")
    return out


def scoreboard_line(snapshot: Snapshot | None, width: int | None = None) -> Text:
    """The overview's one line: live point vs the first reference, latency, cache. Within
    `width` cells only the items that fit whole, in order (a figure is never cut off from
    its label: "break-even" without its number said nothing)."""
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    if snapshot is None:
        return out
    s = snapshot.session
    c = snapshot.cluster
    first = Text.assemble(
        ("scoreboard ", "bold grey70"),
        (f"{fmt_num(s.output_tokens_per_s_per_gpu, 0)} tok/s/GPU", "bold green"),
        (f" (full {fmt_num(s.full_acceptance_tokens_per_s_per_gpu, 0)})", "cyan"),
        f" · {fmt_num(s.output_tokens_per_s_per_user, 0)} tok/s/user",
    )
    items = [first]
    refs = c.reference_points
    if refs:
        r = refs[0]
        gpu, user = fmt_num(r.output_tokens_per_s_per_gpu, 0), fmt_num(r.output_tokens_per_s_per_user, 0)
        items.append(Text(f"  vs {inert(r.label, max_len=12).plain} {gpu}/{user}", "yellow"))
    ttft, itl = fmt_scoreboard_p99(c, s, "ttft"), fmt_scoreboard_p99(c, s, "itl")
    items.append(Text(f"   TTFT p99 {ttft}  ITL p99 {itl}"))
    items.append(Text(f"   prefix hit {fmt_pct(c.total.prefix_cache_hit_rate)}"))
    if s.breakeven_output_tokens_per_s is not None:
        items.append(Text(f"   break-even {fmt_num(s.breakeven_output_tokens_per_s, 0)} tok/s"))
    items.append(Text("   (b)", "grey50"))
    used = 0
    for n, item in enumerate(items):
        if n and width is not None and used + item.cell_len > width:
            break
        out.append_text(item)
        used += item.cell_len
    return out
