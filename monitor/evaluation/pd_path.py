"""The prefill → decode path as one thing: the engines' KV-transfer figures beside both
ends' network figures. Pure.

For each pair of a prefill pool and a decode pool (roles "prefill" and "decode"):
- KV bytes/s, failures/s and the mean transfer time from the engines (vLLM `vllm:nixl_*`,
  SGLang `sglang:kv_transfer_*`), counted on the decode side where its engines count
  (NIXL counts where the transfer is read), else on the prefill side; transfer-time
  percentiles from the pools' summed NIXL histogram increases over the window;
- each end's fabric ports summed: rx/tx bytes/s against their line rate, IB xmit_wait,
  RoCE pause frames and congestion notifications per second;
- a KV rate above what the narrower end's ports can carry is flagged as a measurement
  problem, never shown as speed;
- "congested" rests on the congestion counters (pause / CNP / ECN / xmit_wait) where they
  are read: a port counts only well above its pool's baseline (congestion.py, the same
  rule as the node's `congested` verdict), named with its node, worst first; where none
  is read, on the rate against the line — and the view says which it used (`evidence`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.congestion import CongestionPool, congestion_pool, port_findings, port_text
from infertop.monitor.evaluation.latency import LatencyWindow, merge, percentile
from infertop.monitor.evaluation.links import reads_congestion
from infertop.monitor.format import fmt_si
from infertop.monitor.snapshot import NicView, NodeView, PdEndView, PdPathView

PREFILL, DECODE = "prefill", "decode"
FABRIC_KINDS = ("roce", "infiniband")
CARRIER_KINDS = ("ethernet", "bond", "other")


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def fabric_ports(node: NodeView) -> list[NicView]:
    """The ports KV moves over: the node's up RDMA ports (RoCE / IB), else its up
    Ethernet carriers (bond members not counted twice: the bond stands for them)."""
    up = [n for n in node.nics if n.up is not False and n.kind != "loopback"]
    rdma = [n for n in up if n.kind in FABRIC_KINDS]
    if rdma:
        return rdma
    members = {m for n in up if n.kind == "bond" for m in (n.members or ())}
    return [n for n in up if n.kind in CARRIER_KINDS and n.name not in members]


def congestion_ports(node: NodeView) -> list[NicView]:
    """Every port whose congestion counters count: RoCE pause frames are counted on the
    RDMA device's Ethernet netdev (ethtool), its CNPs on the RDMA port (hw_counters) —
    each counter on one of them only, so summing both never counts twice."""
    return [n for n in node.nics if n.up is not False and n.kind not in ("loopback", "bond")]


def _congested_ports(nodes: Sequence[NodeView], pool: CongestionPool, th: Thresholds) -> list[str]:
    """"decode-05/mlx5_0: xmit_wait 2M/s (pool 801/s)", worst first over the end's nodes."""
    found = [(f.score, node.name, f) for node in nodes for f in port_findings(node, pool, th)]
    found.sort(key=lambda t: (-t[0], t[1], t[2].port))
    return [f"{name}/{port_text(f).replace(' ', ': ', 1)}" for _, name, f in found]


def _signal_kind(figure: str) -> str | None:
    """The counter a port's figure is of: "prio 3 pause rx 20k/s …" → "pause"; None for
    the line-rate note ("at 96 % of line rate"), which is no counter."""
    words = figure.split()
    if words[:1] == ["prio"]:
        words = words[2:]
    return None if not words or words[0] == "at" else words[0]


def end_view(nodes: Sequence[NodeView], th: Thresholds, pool: CongestionPool | None = None) -> PdEndView:
    nics = [nic for node in nodes for nic in fabric_ports(node)]
    signals = [nic for node in nodes for nic in congestion_ports(node)]
    speeds = [nic.speed_gbps for nic in nics]
    line = None if not nics or any(s is None for s in speeds) else sum(s or 0.0 for s in speeds) * 1e9 / 8
    return PdEndView(
        nodes=len(nodes),
        ports=len(nics),
        line_rate_bytes_per_s=line,
        rx_bytes_per_s=_sum([n.rx_bytes_per_s for n in nics]),
        tx_bytes_per_s=_sum([n.tx_bytes_per_s for n in nics]),
        xmit_wait_per_s=_sum([n.xmit_wait_per_s for n in signals]),
        rx_pause_per_s=_sum([n.rx_pause_per_s for n in signals]),
        tx_pause_per_s=_sum([n.tx_pause_per_s for n in signals]),
        cnp_sent_per_s=_sum([n.cnp_sent_per_s for n in signals]),
        cnp_handled_per_s=_sum([n.cnp_handled_per_s for n in signals]),
        congested_ports=_congested_ports(nodes, pool if pool is not None else congestion_pool(nodes), th),
    )


def _kv(nodes: Sequence[NodeView]) -> tuple[float | None, float | None, float | None]:
    engines = [n.engine for n in nodes if n.engine is not None]
    rate = _sum([e.kv_transfer_bytes_per_s for e in engines])
    if rate is None:  # SGLang: the latest transfers' speed gauge
        rate = _sum([e.kv_transfer_speed_bytes_per_s for e in engines])
    failures = _sum([e.kv_transfer_failures_per_s for e in engines])
    means = [m for e in engines if (m := e.kv_transfer_mean_s if e.kv_transfer_mean_s is not None
                                     else e.kv_transfer_latency_s) is not None]
    return rate, failures, (sum(means) / len(means) if means else None)


def _gbs(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else fmt_si(bytes_per_s * 8 / 1e9, " Gb/s")


def path_view(prefill: Sequence[NodeView], decode: Sequence[NodeView], th: Thresholds,
              latency_windows: Mapping[str, LatencyWindow],
              prefill_pool: str = PREFILL, decode_pool: str = DECODE) -> PdPathView:
    """One prefill → decode path from the answering nodes of its two pools
    (`latency_windows`: node name → its window, cluster.Evaluated)."""
    pool = congestion_pool([*prefill, *decode])
    rate, failures, mean_s = _kv(decode)
    counted_by: str | None = decode_pool if rate is not None else None
    if rate is None:
        rate, failures, mean_s = _kv(prefill)
        counted_by = prefill_pool if rate is not None else None
    elif failures is None:
        failures = _kv(prefill)[1]
    windows = [latency_windows[n.name].get("kv_transfer")
               for n in (*decode, *prefill) if n.name in latency_windows]
    merged = merge(windows) if windows else None
    p50, p99 = percentile(merged, 0.5), percentile(merged, 0.99)
    ends = end_view(prefill, th, pool), end_view(decode, th, pool)
    lines = [e.line_rate_bytes_per_s for e in ends if e.line_rate_bytes_per_s is not None]
    narrow = min(lines) if lines else None
    above = None if rate is None or narrow is None else rate > narrow
    read = any(reads_congestion(nic) for n in (*prefill, *decode) for nic in congestion_ports(n))
    congested_ports = ends[0].congested_ports + ends[1].congested_ports
    congested: bool | None
    if read:
        congested = bool(congested_ports)
        kinds = sorted({k for p in congested_ports for f in p.split(": ", 1)[1].split(", ")
                        if (k := _signal_kind(f)) is not None})
        evidence = (f"congestion counters ({', '.join(kinds)})" if kinds
                    else "congestion counters (none rising)")
    elif rate is not None and narrow is not None and not above:
        congested = rate >= narrow * th.link_busy_ratio
        evidence = "rate against line rate (no congestion counters read)"
    else:
        congested, evidence = None, None
    parts = [f"KV {_gbs(rate)}"]
    if narrow is not None:
        parts.append(f"of {_gbs(narrow)} line")
    if above:
        parts.append("ABOVE LINE RATE: a measurement problem, not a speed")
    if congested:
        parts.append(f"congested — {'; '.join(congested_ports) or 'near line rate'}")
    if failures:
        parts.append(f"{fmt_si(failures)} failed transfers/s")
    expired = _sum([n.engine.kv_transfer_expired_per_s for n in (*prefill, *decode) if n.engine is not None])
    if expired:
        parts.append(f"{fmt_si(expired)} expired requests/s")
    return PdPathView(
        prefill_pool=prefill_pool, decode_pool=decode_pool,
        kv_bytes_per_s=None if above else rate,
        kv_bytes_per_s_reported=rate,
        kv_counted_by=counted_by,
        kv_transfer_mean_s=mean_s,
        kv_transfer_p50_s=p50.value_s if p50 is not None else None,
        kv_transfer_p99_s=p99.value_s if p99 is not None else None,
        kv_transfer_failures_per_s=failures,
        kv_transfer_expired_per_s=expired,
        prefill=ends[0], decode=ends[1],
        above_line_rate=above, congested=congested, evidence=evidence,
        detail=", ".join(parts),
    )


def pd_paths(
    nodes: Sequence[NodeView], th: Thresholds, latency_windows: Mapping[str, LatencyWindow]
) -> list[PdPathView]:
    """The prefill → decode path, when the cluster has both pools (answering nodes only;
    `latency_windows`: node name → its window, cluster.Evaluated)."""
    ok = [n for n in nodes if n.status == "ok"]
    prefill = [n for n in ok if n.role == PREFILL]
    decode = [n for n in ok if n.role == DECODE]
    if not any(n.role == PREFILL for n in nodes) or not any(n.role == DECODE for n in nodes):
        return []
    return [path_view(prefill, decode, th, latency_windows)]
