"""How the prefill → decode path reads on the scoreboard: one block per path, the KV
figures on the first line, each end's network beneath. Pure (Rich `Text`); judged in
monitor/evaluation/pd_path.py, drawn here as it arrives."""

from __future__ import annotations

from rich.text import Text

from infertop.monitor.format import fmt_latency, fmt_num, fmt_rate_gbps, fmt_si
from infertop.monitor.snapshot import PdEndView, PdPathView, Snapshot
from infertop.tui.columns import GREY, TROUBLE, WARN
from infertop.tui.text import inert


def _per_s(value: float | None) -> str:
    return "—" if value is None else fmt_si(value, "/s")


def end_line(label: str, end: PdEndView | None) -> Text:
    out = Text(f"  {label:<8}", GREY)
    if end is None or end.ports == 0:
        return out.append("no fabric port seen", GREY)
    plural = "s" if end.ports != 1 else ""
    out.append(f"{end.ports} port{plural}, line {fmt_rate_gbps(end.line_rate_bytes_per_s)}"
               f"  rx {fmt_rate_gbps(end.rx_bytes_per_s)}  tx {fmt_rate_gbps(end.tx_bytes_per_s)}")
    out.append(f"  pause rx/tx {_per_s(end.rx_pause_per_s)} / {_per_s(end.tx_pause_per_s)}"
               f"  CNP sent/handled {_per_s(end.cnp_sent_per_s)} / {_per_s(end.cnp_handled_per_s)}"
               f"  xmit_wait {_per_s(end.xmit_wait_per_s)}")
    for port in end.congested_ports[:4]:
        out.append("\n    ")
        out.append(inert(port, max_len=120).plain, WARN)
    return out


def path_text(path: PdPathView) -> Text:
    out = Text()
    out.append(f"{inert(path.prefill_pool, max_len=24).plain} → {inert(path.decode_pool, max_len=24).plain}",
               "bold")
    if path.above_line_rate:
        out.append(f"  KV {fmt_rate_gbps(path.kv_bytes_per_s_reported)} reported: ABOVE LINE RATE — "
                   "a measurement problem, not a speed", TROUBLE)
    else:
        out.append(f"  KV {fmt_rate_gbps(path.kv_bytes_per_s)}")
    counted = f" (counted by {inert(path.kv_counted_by, max_len=24).plain})" if path.kv_counted_by else ""
    out.append(counted, GREY)
    out.append(f"  transfer p50 {fmt_latency(path.kv_transfer_p50_s)}"
               f" p99 {fmt_latency(path.kv_transfer_p99_s)} mean {fmt_latency(path.kv_transfer_mean_s)}")
    out.append(f"  failed {fmt_num(path.kv_transfer_failures_per_s, 2)}/s"
               f"  expired {fmt_num(path.kv_transfer_expired_per_s, 2)}/s")
    if path.congested:
        out.append("  CONGESTED", TROUBLE)
    if path.evidence:
        out.append(f"  [{inert(path.evidence, max_len=80).plain}]", GREY)
    out.append("\n")
    out.append_text(end_line("prefill", path.prefill))
    out.append("\n")
    out.append_text(end_line("decode", path.decode))
    return out


def pd_paths_text(snapshot: Snapshot) -> Text:
    return Text("\n").join(path_text(p) for p in snapshot.pd_paths)
