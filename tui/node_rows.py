"""What the node screen shows: GPU rows, NIC/IB port rows, the engine and host blocks.

Pure (Rich `Text` only); every piece of outside text goes through `tui.text.inert`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from rich.text import Text

from infertop.monitor.format import (
    UNKNOWN,
    fmt_age,
    fmt_bytes_pair,
    fmt_exact,
    fmt_num,
    fmt_pct,
    fmt_power_w,
    fmt_rate_gbps,
    fmt_si,
    fmt_usd,
)
from infertop.monitor.snapshot import EngineView, GpuView, HostView, NicView, NodeView
from infertop.tui.columns import GREY, SEVERITY_STYLE, TROUBLE, WARN, status_cell
from infertop.tui.draft_chart import position_chart
from infertop.tui.sparkline import sparkline
from infertop.tui.text import inert

SPARK_WIDTH = 20
GPU_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("index", "GPU", 4),
    ("name", "NAME", None),
    ("util", "UTIL", 5),
    ("util_spark", "UTIL (recent)", SPARK_WIDTH),
    ("mem", "MEM", 13),
    ("power", "POWER", 7),
    ("power_spark", "POWER (recent)", SPARK_WIDTH),
    ("temp", "TEMP", 5),
    ("clock", "SM MHZ", 7),
    ("events", "CLOCK EVENTS", None),
    ("health", "HEALTH", None),
    ("nvlink", "NVLINK", None),
)
NIC_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("name", "PORT", None),
    ("kind", "KIND", 10),
    ("state", "STATE", 14),
    ("speed", "SPEED / EXPECTED", 17),
    ("rx", "RX", 10),
    ("tx", "TX", 10),
    ("wait", "XMIT-WAIT/S", 11),
    # RoCE congestion: pause frames received / sent, CNPs sent / handled, per second
    ("pause", "PAUSE/S RX/TX", 13),
    ("cnp", "CNP/S SENT/HDL", 14),
    ("ecn", "ECN/S", 7),  # ECN-marked packets received
    ("errors", "ERR/S", 7),
    ("bond", "BOND", None),
)


def _r(text: str, style: str = "") -> Text:
    return Text(text, style=style, justify="right", no_wrap=True)


def _l(text: str, style: str = "") -> Text:
    return Text(text, style=style, no_wrap=True)


def health_cell(gpu: GpuView) -> Text:
    problems: list[str] = []
    if gpu.healthy is False:
        problems.append("LOST" if gpu.kind == "gpu" else "UNHEALTHY")
    if gpu.xid_last:
        problems.append(f"XID {gpu.xid_last}")
    if gpu.ecc_uncorrected_total:
        problems.append(f"ECC {fmt_num(gpu.ecc_uncorrected_total, 0)}")
    if gpu.error:
        problems.append(inert(gpu.error, max_len=60).plain)
    if problems:
        return _l(" ".join(problems), TROUBLE)
    return _l("ok" if gpu.healthy else UNKNOWN, "green" if gpu.healthy else "")


def nvlink_cell(gpu: GpuView) -> Text:
    rates = [r for r in (gpu.nvlink_rx_bytes_per_s, gpu.nvlink_tx_bytes_per_s) if r is not None]
    if not rates and gpu.nvlink_bytes_per_s is not None:
        rates = [gpu.nvlink_bytes_per_s]  # both directions together (dcgm-exporter default)
    traffic = fmt_rate_gbps(sum(rates)) if rates else None
    if gpu.nvlink_links_total is None:
        # an exporter gives traffic without a link count: still worth showing
        return _l(traffic or UNKNOWN)
    up = gpu.nvlink_links_up
    text = f"{UNKNOWN if up is None else up}/{gpu.nvlink_links_total} up"
    if traffic:
        text += f" {traffic}"
    down = up is not None and up < gpu.nvlink_links_total
    return _l(text, TROUBLE if down else "")


def gpu_row(
    gpu: GpuView,
    util_history: Sequence[float | None],
    power_history: Sequence[float | None],
    power_top_w: float | None = None,
) -> tuple[Text, ...]:
    """`power_top_w`: the top of the power sparkline's scale (shared by the pool); None:
    this GPU's own largest value."""
    names = gpu.clock_events
    events_style = {"critical": TROUBLE, "warning": WARN}.get(gpu.clock_event_level or "none", GREY)
    return (
        _r(str(gpu.index)),
        inert(gpu.name or UNKNOWN, max_len=40),
        _r(fmt_num(gpu.util_pct, 0, "%")),
        _l(sparkline(util_history, SPARK_WIDTH, 0.0, 100.0), "cyan"),
        _r(fmt_bytes_pair(gpu.mem_used_bytes, gpu.mem_total_bytes)),
        _r(fmt_power_w(gpu.power_w)),
        _l(sparkline(power_history, SPARK_WIDTH, 0.0, power_top_w), "cyan"),
        _r(fmt_num(gpu.temp_c, 0, "°C")),
        _r(fmt_num(gpu.sm_clock_mhz, 0)),
        _l(", ".join(names) if names else (UNKNOWN if names is None else "none"), events_style),
        health_cell(gpu),
        nvlink_cell(gpu),
    )


def port_errors_per_s(nic: NicView) -> float | None:
    """Every known error rate of a port together (symbol / RoCE errors, received and sent
    errors, link integrity errors, link recoveries); None when none is known. Drops are
    not errors (a full queue, a down port) and are left to the JSON snapshot."""
    known = [
        r for r in (nic.errors_per_s, nic.rx_errors_per_s, nic.tx_errors_per_s,
                    nic.link_integrity_errors_per_s, nic.link_recoveries_per_s)
        if r is not None
    ]
    return sum(known) if known else None


def _count_rate(value: float | None) -> str:
    if value is None:
        return UNKNOWN
    if value == 0:
        return "0"
    return fmt_si(value) if value < 10 else fmt_si(value, digits=0)


def rate_pair_cell(first: float | None, second: float | None) -> Text:
    """Two per-second counts as "a/b" ("—" for one unknown); all "—" when both are, so a
    source that does not read the counters reads as unknown, not as a quiet port."""
    if first is None and second is None:
        return _r(UNKNOWN, GREY)
    rising = any(v for v in (first, second))
    return _r(f"{_count_rate(first)}/{_count_rate(second)}", WARN if rising else "")


def nic_row(nic: NicView) -> tuple[Text, ...]:
    up = nic.up
    expected = nic.expected_gbps is not None
    state_style = "" if up else (TROUBLE if expected else GREY)
    if (nic.speed_gbps is None or up is False) and nic.expected_gbps is None:
        speed = _r(UNKNOWN)
    elif nic.expected_gbps is None:
        speed = _r(fmt_exact(nic.speed_gbps, " Gb/s"))
    else:
        # a port that is not up carries no traffic at any speed: its rated speed would
        # read as a healthy 400/400
        have = UNKNOWN if nic.speed_gbps is None or up is False else fmt_exact(nic.speed_gbps)
        speed = _r(f"{have}/{fmt_exact(nic.expected_gbps)} Gb/s", TROUBLE if nic.slow or up is False else "")
    bond = _l("")
    if nic.members is not None:
        members_up = UNKNOWN if nic.members_up is None else str(nic.members_up)
        short = nic.members_up is not None and nic.members_up < len(nic.members)
        bond = _l(f"{members_up}/{len(nic.members)} up: " + ", ".join(inert(m, max_len=20).plain
                                                                    for m in nic.members[:8]),
                  TROUBLE if short else "")
    waits = nic.xmit_wait_per_s
    errors = port_errors_per_s(nic)
    return (
        inert(nic.name, max_len=40),
        inert(nic.kind, max_len=10),
        _l(inert(nic.state or UNKNOWN, max_len=14).plain, state_style),
        speed,
        _r(fmt_rate_gbps(nic.rx_bytes_per_s)),
        _r(fmt_rate_gbps(nic.tx_bytes_per_s)),
        _r(fmt_num(waits, 0), WARN if waits else ""),
        rate_pair_cell(nic.rx_pause_per_s, nic.tx_pause_per_s),
        rate_pair_cell(nic.cnp_sent_per_s, nic.cnp_handled_per_s),
        _r(UNKNOWN, GREY) if nic.ecn_marked_per_s is None
        else _r(_count_rate(nic.ecn_marked_per_s), WARN if nic.ecn_marked_per_s else ""),
        _r(fmt_num(errors, 1), WARN if errors else ""),
        bond,
    )


def _pair(out: Text, label: str, value: str, style: str = "") -> None:
    out.append(f"{label} ", "grey70")
    out.append(value, style or "bold")
    out.append("   ")


def _hms_utc(epoch_s: float) -> str:
    try:
        return datetime.fromtimestamp(epoch_s, UTC).strftime("%H:%M:%S")
    except (OverflowError, OSError, ValueError):  # a record's time past any calendar
        return UNKNOWN


def window_span(engine: EngineView) -> str:
    """", over readings 05:12:03–05:12:13 UTC": the readings the window's figures are
    from, and for a log the span of its own lines they cover; "" when not known."""
    first, last = engine.window_first_reading_at, engine.window_last_reading_at
    if first is None or last is None:
        return ""
    text = f", over readings {_hms_utc(first)}–{_hms_utc(last)} UTC"
    start, end = engine.log_window_start_at, engine.log_window_end_at
    if start is not None and end is not None:
        text += f" (log lines after {_hms_utc(start)} to {_hms_utc(end)})"
    return text


def engine_text(
    engine: EngineView | None,
    steps_history: Sequence[float | None],
    steps_top: float | None = None,
    pool: str = "",
) -> Text:
    """`steps_top`: the top of the steps/s sparkline's scale, shared by the node's `pool`
    (shown after the line); None: the node's own largest value."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("ENGINE  ", "bold")
    if engine is None:
        out.append("no engine figures for this node", GREY)
        return out
    source = inert(engine.source or UNKNOWN, max_len=16).plain
    profile = inert(engine.profile or UNKNOWN, max_len=24).plain
    out.append(f"{source} ({profile}), figures {fmt_age(engine.age_s)} old{window_span(engine)}\n", GREY)
    _pair(out, "decode steps/s", fmt_num(engine.decode_steps_per_s, 1))
    if engine.slowest_rank is not None:
        # the monitor's one definition: the slowest busy rank paces the node's step
        out.append(f"slowest {inert(engine.slowest_rank, max_len=40).plain}, "
                   f"fastest {fmt_num(engine.fastest_rank_steps_per_s, 1)}  ", "yellow")
    out.append(sparkline(steps_history, SPARK_WIDTH * 2, 0.0, steps_top), "cyan")
    if steps_top is not None:
        out.append(f" 0–{fmt_num(steps_top, 1)}", GREY)
        if pool:
            out.append(f" ({inert(pool, max_len=24).plain} pool scale)", GREY)
    out.append("\n")
    _pair(out, "draft acceptance", fmt_pct(engine.draft_acceptance, 1))
    _pair(out, "mean acceptance length", fmt_num(engine.mean_acceptance_length, 2))
    out.append("\n")
    chart = position_chart(engine.acceptance_by_position)
    if chart.plain:
        out.append_text(chart)
        out.append("\n")
    _pair(out, "tokens/s accepted", fmt_num(engine.accepted_tokens_per_s, 0))
    _pair(out, "full-acceptance", fmt_num(engine.full_acceptance_tokens_per_s, 0))
    _pair(out, "prompt", fmt_num(engine.prompt_tokens_per_s, 0))
    out.append("\n")
    _pair(out, "requests running", fmt_num(engine.requests_running, 0))
    _pair(out, "waiting", fmt_num(engine.requests_waiting, 0))
    _pair(out, "finished/s", fmt_num(engine.requests_finished_per_s, 2))
    if engine.requests_aborted_per_s:
        _pair(out, "aborted/s", fmt_num(engine.requests_aborted_per_s, 2))
    _pair(out, "KV cache", fmt_pct(engine.kv_cache_usage))
    return out


def host_text(host: HostView | None) -> Text:
    out = Text(no_wrap=True)
    out.append("HOST  ", "bold")
    if host is None:
        out.append("no host figures", GREY)
        return out
    _pair(out, "cpu", fmt_num(host.cpu_pct, 0, "%"))
    _pair(out, "mem", fmt_bytes_pair(host.mem_used_bytes, host.mem_total_bytes))
    return out


def scale_text(pool: str, nodes: int, power_top_w: float | None) -> Text:
    """The GPU section's title with the sparklines' scale: shared by the pool's GPUs, so
    a GPU drawing less than its peers has a lower line."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("GPUS", "bold")
    out.append(f"   sparklines on the {inert(pool, max_len=24).plain} pool's scale "
               f"({nodes} node{'s' if nodes != 1 else ''}): util 0–100%, power "
               + (UNKNOWN if power_top_w is None else f"0–{fmt_power_w(power_top_w)}"),
               GREY)
    return out


def title_text(node: NodeView) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(inert(node.name, "bold", max_len=80))
    out.append(f"  {node.role}  ")
    out.append(status_cell(node))
    out.append(f"  age {fmt_age(node.age_s)}", GREY)
    sources = ", ".join(inert(s, max_len=20).plain for s in node.sources) or UNKNOWN
    out.append(f"  sources {sources}", GREY)
    out.append(f"  {fmt_usd(node.cost_per_hour_usd)}/h  idle {fmt_pct(node.idle_fraction)}")
    return out


def notes_text(node: NodeView) -> Text:
    """Verdicts with their reasons, what cannot be seen and why (coverage), the error, and
    the notes (all inert)."""
    out = Text()
    for verdict in node.verdicts:
        out.append(inert(verdict.kind, max_len=24).plain, SEVERITY_STYLE.get(verdict.severity, ""))
        out.append(": ")
        out.append(inert(verdict.detail, max_len=300))
        out.append("\n")
    for gap in node.coverage:
        # a gap every peer shares is the cluster's finding (the hunt list's), not this node's
        out.append("unseen (fleet-wide): " if gap.shared else "unseen: ", WARN)
        out.append(inert(gap.detail, max_len=300))
        out.append("\n")
    if node.error:
        out.append("error: ", TROUBLE)
        out.append(inert(node.error, max_len=300))
        out.append("\n")
    old_memory = [str(g.index) for g in node.gpus if g.mem_info_version == 1]
    if old_memory:
        # drawn from the view, not judged: which NVML call the MEM figures come from
        out.append("note: ", GREY)
        out.append(f"GPU {', '.join(old_memory)} memory from NVML v1 (this driver has no v2): "
                   "used includes the driver's reserved memory, nvidia-smi shows less")
        out.append("\n")
    for note in node.notes:
        out.append("note: ", GREY)
        out.append(inert(note, max_len=300))
        out.append("\n")
    out.rstrip()
    return out
