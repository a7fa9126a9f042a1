"""Plain-text table of a Snapshot for `infertop snapshot` without --json.

Everything from nodes (names, notes, errors, verdict kinds) passes through the one
sanitiser, `inert_text`: a node cannot set the terminal's title, clear the screen,
reorder a line with bidi overrides or forge a line of its own.
"""

from __future__ import annotations

import datetime as dt

from infertop.collectors.safe_text import inert_text
from infertop.monitor.evaluation.judging import judging_note
from infertop.monitor.format import (
    UNKNOWN,
    fmt_age,
    fmt_num,
    fmt_pct,
    fmt_rate_gbps,
    fmt_scoreboard_p99,
    fmt_usd,
    links_text,
)
from infertop.monitor.snapshot import NodeView, Snapshot, VerdictView

MAX_CELL_CHARS = 80
MAX_LINE_CHARS = 500
_COLUMNS = ("NODE", "ROLE", "STATUS", "GPUS", "UTIL", "POWER", "LINKS", "NET RX", "NET TX",
            "STEPS/S", "ACCEPT", "TOK/S", "$/H", "IDLE", "VERDICTS")


def _verdict_text(v: VerdictView) -> str:
    # a condition still within its hold time is said as such: "idle (pending 4s)"
    return f"{v.kind} (pending {fmt_age(v.held_s)})" if v.pending else v.kind


def _row(n: NodeView) -> tuple[str, ...]:
    utils = [g.util_pct for g in n.gpus if g.util_pct is not None]
    power = [g.power_w for g in n.gpus if g.power_w is not None]
    rx = [x.rx_bytes_per_s for x in n.nics if x.rx_bytes_per_s is not None and x.kind != "loopback"]
    tx = [x.tx_bytes_per_s for x in n.nics if x.tx_bytes_per_s is not None and x.kind != "loopback"]
    e = n.engine
    return (
        inert_text(n.name, MAX_CELL_CHARS),
        inert_text(n.role, MAX_CELL_CHARS),
        inert_text(n.standing or n.status, MAX_CELL_CHARS),
        # no GPU seen is unknown, not 0 (an unreachable node's layout may say 8)
        str(len(n.gpus)) if n.gpus else UNKNOWN,
        fmt_num(sum(utils) / len(utils), 0, "%") if utils else "—",
        fmt_num(sum(power), 0, " W") if power else "—",
        links_text(n.links),
        fmt_rate_gbps(sum(rx)) if rx else "—",
        fmt_rate_gbps(sum(tx)) if tx else "—",
        fmt_num(e.decode_steps_per_s if e else None, 1),
        fmt_pct(e.draft_acceptance if e else None),
        fmt_num(e.accepted_tokens_per_s if e else None, 0),
        fmt_usd(n.cost_per_hour_usd),
        fmt_pct(n.idle_fraction),
        inert_text(", ".join(_verdict_text(v) for v in n.verdicts) or "—", MAX_LINE_CHARS),
    )


def _scoreboard_line(snapshot: Snapshot) -> str:
    """The live decode point beside the first reference, and the pool's p99 latency."""
    s = snapshot.session
    ref = snapshot.cluster.reference_points[0] if snapshot.cluster.reference_points else None
    versus = (f" (reference {inert_text(ref.label, 20)}: {fmt_num(ref.output_tokens_per_s_per_gpu, 0)}"
              f" / {fmt_num(ref.output_tokens_per_s_per_user, 0)}, {inert_text(ref.accounting, 20)})"
              if ref is not None else "")
    return (
        f"scoreboard: {fmt_num(s.output_tokens_per_s_per_gpu, 0)} accepted tok/s per GPU "
        f"({fmt_num(s.full_acceptance_tokens_per_s_per_gpu, 0)} full acceptance), "
        f"{fmt_num(s.output_tokens_per_s_per_user, 0)} per user{versus}; "
        f"TTFT p99 {fmt_scoreboard_p99(snapshot.cluster, s, 'ttft', bounds=True)}, "
        f"ITL p99 {fmt_scoreboard_p99(snapshot.cluster, s, 'itl', bounds=True)}"
    )


def snapshot_table(snapshot: Snapshot) -> str:
    rows = [_COLUMNS] + [_row(n) for n in snapshot.nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    s = snapshot.session
    lines.append("")
    lines.append(
        f"cluster {inert_text(snapshot.cluster.name, MAX_CELL_CHARS)}: "
        f"{fmt_usd(snapshot.cluster.total.cost_per_hour_usd)}/h, "
        f"spend {fmt_usd(s.spend_usd)} (idle {fmt_usd(s.idle_spend_usd)}), "
        f"$/1M tokens {fmt_usd(s.usd_per_million_output_tokens)}"
        + (f" (since {s.tokens_since})" if s.usd_per_million_span == "watched" else "")
    )
    lines.append(_scoreboard_line(snapshot))
    judging = judging_note(snapshot.cluster, len(snapshot.nodes))
    if judging:  # a window shorter than the first verdicts': no verdict is not all clear
        lines.append(judging)
    total = snapshot.cluster.total
    if total.partial:
        lines.append(f"partial: cluster figures over {total.nodes_counted} of {total.nodes_expected} nodes")
    health = snapshot.monitor
    if health is not None and health.lagging:
        advice = f" — {health.suggestion}" if health.suggestion else ""
        lines.append(f"monitor lagging: {health.reason}{advice}")
    for spot in snapshot.cluster.shared_blind_spots:  # once here, not on each node below
        lines.append(f"unseen cluster: {inert_text(spot.note, MAX_LINE_CHARS)}")
    for backend in snapshot.backends:  # its delay said once, not on every node it serves
        if backend.note is not None:
            lines.append(inert_text(backend.note, MAX_LINE_CHARS))
    if snapshot.detail is not None and snapshot.detail.every_s is not None:
        lines.append(snapshot.detail.note)
    for path in snapshot.pd_paths:  # the P→D path, with the evidence it rests on
        evidence = f" [{inert_text(path.evidence, MAX_CELL_CHARS)}]" if path.evidence else ""
        lines.append(f"path {inert_text(path.prefill_pool, MAX_CELL_CHARS)} → "
                     f"{inert_text(path.decode_pool, MAX_CELL_CHARS)}: "
                     f"{inert_text(path.detail, MAX_LINE_CHARS)}{evidence}")
    for node in snapshot.nodes:
        name = inert_text(node.name, MAX_CELL_CHARS)
        for drift in node.config_drift:
            lines.append(f"drift {name}: {inert_text(drift.setting, MAX_CELL_CHARS)} "
                         f"{inert_text(drift.value, MAX_CELL_CHARS)}, pool "
                         f"{inert_text(drift.pool_value, MAX_CELL_CHARS)}")
    for event in snapshot.timeline[-10:]:  # the latest happenings; `t` in the TUI has them all
        when = dt.datetime.fromtimestamp(event.at, dt.UTC).strftime("%H:%M:%S")
        where = inert_text(event.node or "cluster", MAX_CELL_CHARS)
        detail = inert_text(event.detail, MAX_LINE_CHARS)
        lines.append(f"event {when} {inert_text(event.kind, 24)} {where}: {detail}")
    for node in snapshot.nodes:
        name = inert_text(node.name, MAX_CELL_CHARS)
        # the blind verdict's reasons, whether or not it held yet; those its peers share too
        # are the cluster's line above
        for gap in (g for g in node.coverage if not g.shared):
            lines.append(f"unseen {name}: {inert_text(gap.detail, MAX_LINE_CHARS)}")
        for note in node.notes:
            lines.append(f"note {name}: {inert_text(note, MAX_LINE_CHARS)}")
        if node.error:
            lines.append(f"error {name}: {inert_text(node.error, MAX_LINE_CHARS)}")
    return "\n".join(lines) + "\n"
