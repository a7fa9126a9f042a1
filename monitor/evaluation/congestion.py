"""The congested condition: a node whose own ports say the fabric is holding it back. Pure.

Evidence, each figure beside the median of the same figure on its role peers' ports
(the pool's baseline, the node itself left out):
- RoCE pause frames received / sent (node_exporter's ethtool collector, the probe's
  ethtool statistics), congestion notifications sent / handled and ECN-marked packets
  (mlx5 hw_counters; the netdev's rx_ecn_mark), IB port_xmit_wait;
- a port near line rate while its peers' ports are not.

A port counts only when a figure is well above its pool's baseline: over the layout's
floor for that counter (`link_pause_per_s`, `link_cnp_per_s`, `link_xmit_wait_per_s`)
and over `congestion_ratio` × the peers' median. A fabric whose every port waits a
little (IB xmit_wait of a few hundred a second on every port) has a baseline, and no
port at the baseline is ever congested. Ports near line rate while their peers' are not
are told beside that evidence; alone they raise nothing here (a port at line rate
because its peers are down is link-starved's, links.py).

Where the node is an end of the prefill → decode path, its KV transfers' mean duration
is told beside its pool's. A counter the node does not read is coverage's to say, once
(coverage.congestion_counter_gaps; a gap every node shares is one finding), not this
reason's.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.conditions import CONGESTED, Condition
from infertop.monitor.format import fmt_pool, fmt_si
from infertop.monitor.snapshot import EvidenceView, NicView, NodeView

MAX_PORTS = 4  # a reason is one line: the worst few ports, the rest counted


@dataclass(frozen=True)
class Signal:
    label: str  # as the reason writes it: "pause rx"
    field: str  # NicView field, per second
    floor: Callable[[Thresholds], float]


SIGNALS: tuple[Signal, ...] = (
    Signal("pause rx", "rx_pause_per_s", lambda th: th.link_pause_per_s),
    Signal("pause tx", "tx_pause_per_s", lambda th: th.link_pause_per_s),
    Signal("CNP sent", "cnp_sent_per_s", lambda th: th.link_cnp_per_s),
    Signal("CNP handled", "cnp_handled_per_s", lambda th: th.link_cnp_per_s),
    Signal("ECN marks", "ecn_marked_per_s", lambda th: th.link_cnp_per_s),
    Signal("xmit_wait", "xmit_wait_per_s", lambda th: th.link_xmit_wait_per_s),
)
LOAD = "load"  # a port's busier direction ÷ its line rate
KV_MEAN = "kv_transfer_mean_s"
PD_ROLES = ("prefill", "decode")


def signal_nics(nics: Sequence[NicView]) -> list[NicView]:
    """The ports whose congestion counters count: every up port but loopback and bonds
    (RoCE pause frames are counted on the RDMA device's netdev, its CNPs on the RDMA port)."""
    return [n for n in nics if n.up is not False and n.kind not in ("loopback", "bond")]


def signal_ports(node: NodeView) -> list[NicView]:
    return signal_nics(node.nics)


def port_load(nic: NicView) -> float | None:
    line = nic.speed_gbps or nic.expected_gbps
    known = [v for v in (nic.rx_bytes_per_s, nic.tx_bytes_per_s) if v is not None]
    if not line or not known:
        return None
    return max(known) * 8 / 1e9 / line


PAUSE_SIDES = {"rx_pause_per_s": "rx", "tx_pause_per_s": "tx"}


def priority_field(side: str, priority: int) -> str:
    """The pool figure of one priority's pause frames: "pause_rx3"."""
    return f"pause_{side}{priority}"


def signal_figures(nic: NicView, s: Signal) -> list[tuple[str, str, float]]:
    """(label, pool field, value) of a signal on a port: pause frames per priority where the
    port reads them per priority ("prio 3 pause rx", judged against the pool's same
    priority), else the signal's one figure."""
    side = PAUSE_SIDES.get(s.field)
    if side is not None and nic.pause_per_s_by_priority:
        per = sorted((int(key[2:]), value) for key, value in nic.pause_per_s_by_priority.items()
                     if key.startswith(side) and value is not None)
        if per:
            return [(f"prio {p} {s.label}", priority_field(side, p), value) for p, value in per]
    value = getattr(nic, s.field)
    return [] if value is None else [(s.label, s.field, value)]


def _figures(node: NodeView) -> dict[str, list[float]]:
    """Every port figure of `node` the baseline is made of, by field."""
    out: dict[str, list[float]] = {}
    for nic in signal_ports(node):
        for s in SIGNALS:
            value = getattr(nic, s.field)
            if value is not None:
                out.setdefault(s.field, []).append(value)
            for _, field, value in signal_figures(nic, s):
                if field != s.field:
                    out.setdefault(field, []).append(value)
        load = port_load(nic)
        if load is not None:
            out.setdefault(LOAD, []).append(load)
    kv = node.engine.kv_transfer_mean_s if node.engine is not None else None
    if kv is not None:
        out[KV_MEAN] = [kv]
    return out


@dataclass(frozen=True)
class CongestionPool:
    """Each answering node's port figures, by role, computed once a tick: a node's baseline
    is the median over its peers' ports (itself left out).

    Every figure of a role is sorted once a tick (`_pooled`); a node's median is the middle
    of that list with its own values left out, found by bisection. Gathering the peers'
    values for each node and figure made a tick O(nodes²): at 1,250 nodes it took
    Monitor.tick from ~4 s of CPU to ~21 s (benchmarks/prom_replay/profile_tick.py)."""

    by_node: Mapping[str, tuple[str, Mapping[str, list[float]]]]
    _pooled: dict[tuple[str, str], list[float]] = dataclass_field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for role, figs in self.by_node.values():
            for name, values in figs.items():
                self._pooled.setdefault((role, name), []).extend(values)
        for values in self._pooled.values():
            values.sort()

    def median(self, node: NodeView, field: str) -> float | None:
        pooled = self._pooled.get((node.role, field))
        if not pooled:
            return None
        own = self.by_node.get(node.name)
        mine = sorted(own[1].get(field, ())) if own is not None and own[0] == node.role else []
        left = len(pooled) - len(mine)
        if left <= 0:
            return None
        half = left // 2
        if left % 2:
            return _kth_without(pooled, mine, half)
        # as statistics.median: the mean of the two middle values
        return (_kth_without(pooled, mine, half - 1) + _kth_without(pooled, mine, half)) / 2


def _kth_without(pooled: list[float], mine: list[float], k: int) -> float:
    """The k-th smallest (from 0) of sorted `pooled` with the values of sorted `mine` (all
    of them in `pooled`) left out: the first pooled value with k + 1 values kept at or below it."""
    lo, hi = 0, len(pooled) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        value = pooled[mid]
        if bisect.bisect_right(pooled, value) - bisect.bisect_right(mine, value) >= k + 1:
            hi = mid
        else:
            lo = mid + 1
    return pooled[lo]


def congestion_pool(nodes: Sequence[NodeView]) -> CongestionPool:
    return CongestionPool({n.name: (n.role, _figures(n)) for n in nodes if n.status == "ok"})


@dataclass(frozen=True)
class PortFinding:
    """One port well above its pool's baseline: its figures (label, value, pool median)."""

    port: str
    figures: tuple[tuple[str, float, float | None], ...]
    score: float  # how far above the baseline, for worst-first order
    load: float | None = None  # busier direction ÷ line rate, where near line rate


def _above(value: float, median: float | None, floor: float, ratio: float) -> float | None:
    """How many times the baseline `value` is, when well above it; else None."""
    if value <= floor:
        return None
    base = max(median or 0.0, floor)
    if median is not None and value <= median * ratio:
        return None
    return value / base if base > 0 else value


def port_findings(node: NodeView, pool: CongestionPool, th: Thresholds) -> list[PortFinding]:
    """`node`'s ports well above its pool's baseline, worst first."""
    out = []
    for nic in signal_ports(node):
        figures, score = [], 0.0
        for s in SIGNALS:
            for label, field, value in signal_figures(nic, s):
                median = pool.median(node, field)
                times = _above(value, median, s.floor(th), th.congestion_ratio)
                if times is not None:
                    figures.append((label, value, median))
                    score = max(score, times)
        if figures:
            load = port_load(nic)
            near = load if load is not None and load >= th.link_busy_ratio else None
            out.append(PortFinding(nic.name, tuple(figures), score, near))
    out.sort(key=lambda f: (-f.score, f.port))
    return out


def busy_ports(node: NodeView, pool: CongestionPool, th: Thresholds) -> list[tuple[NicView, float]]:
    """Ports near line rate while the pool's median port is not (no peers, no baseline:
    a busy link alone is link-starved's to judge, against the node's own GPUs)."""
    median = pool.median(node, LOAD)
    if median is None or median >= th.link_busy_ratio:
        return []
    return [(nic, load) for nic in signal_ports(node)
            if (load := port_load(nic)) is not None and load >= th.link_busy_ratio]


def _named(node: NodeView, pool: CongestionPool, th: Thresholds) -> tuple[
        list[PortFinding], list[tuple[NicView, float]]]:
    """(ports whose counters are well above the baseline, other ports near line rate
    beside them; both empty when no counter is)."""
    findings = port_findings(node, pool, th)
    if not findings:
        return [], []
    named = {f.port for f in findings}
    return findings, [(nic, load) for nic, load in busy_ports(node, pool, th) if nic.name not in named]


def port_text(f: PortFinding) -> str:
    """"mlx5_2 xmit_wait 3.0M/s (pool 801.0/s), at 96 % of line rate"; "pause rx 20.0k/s
    (pool quiet)" where the pool's median is zero (`fmt_pool`)."""
    parts = [f"{label} {fmt_si(value, '/s')} ({fmt_pool(median, '/s')})"
             for label, value, median in f.figures]
    if f.load is not None:
        parts.append(f"at {f.load * 100:.0f} % of line rate")
    return f"{f.port} " + ", ".join(parts)


def congested_condition(node: NodeView, pool: CongestionPool | None, th: Thresholds) -> Condition | None:
    """The node's ports well above its pool's baseline, worst first; its $/h at stake
    (paid for, held back by the fabric)."""
    if pool is None or node.status != "ok":
        return None
    findings, busy = _named(node, pool, th)
    if not findings and not busy:
        return None
    texts = [port_text(f) for f in findings[:MAX_PORTS]]
    if len(findings) > MAX_PORTS:
        texts.append(f"+{len(findings) - MAX_PORTS} more ports")
    for nic, load in busy[:MAX_PORTS]:
        median = pool.median(node, LOAD)
        base = "" if median is None else f" (pool {median * 100:.0f} %)"
        line = nic.speed_gbps or nic.expected_gbps
        texts.append(f"{nic.name} at {load * 100:.0f} % of {line:g} Gb/s{base}")
    reason = "; ".join(texts)
    kv = node.engine.kv_transfer_mean_s if node.engine is not None else None
    if node.role in PD_ROLES and kv is not None:
        median = pool.median(node, KV_MEAN)
        base = "" if median is None else f" (pool {median:.3g} s)"
        reason += f"; KV transfers {kv:.3g} s{base}"
    return Condition(CONGESTED, reason, "warning", node.cost_per_hour_usd,
                     evidence=tuple(congestion_evidence_rows(node, pool, th)))


def congested_ports(node: NodeView, pool: CongestionPool | None, th: Thresholds) -> set[str]:
    """The ports the congested condition names (link-starved leaves them to it)."""
    if pool is None or node.status != "ok":
        return set()
    findings, busy = _named(node, pool, th)
    return {f.port for f in findings} | {nic.name for nic, _ in busy}


def congestion_evidence_rows(node: NodeView, pool: CongestionPool, th: Thresholds) -> list[EvidenceView]:
    """A row per port figure the verdict rests on (worst first), then the KV transfer time."""
    rows = []
    for f in port_findings(node, pool, th):
        for label, value, median in f.figures:
            off = None if median is None else max(value - median, 0.0) / max(abs(median), 1.0)
            rows.append(EvidenceView(figure=f"{f.port} {label}", unit="/s", value=value, median=median,
                                     off=off))
    for nic, load in _named(node, pool, th)[1]:
        median = pool.median(node, LOAD)
        rows.append(EvidenceView(figure=f"{nic.name} load of line rate", unit="%", value=load * 100,
                                 median=None if median is None else median * 100,
                                 off=None if median is None else max(load - median, 0.0)))
    kv = node.engine.kv_transfer_mean_s if node.engine is not None else None
    if kv is not None:
        median = pool.median(node, KV_MEAN)
        rows.append(EvidenceView(figure="KV transfer mean", unit="s", value=kv, median=median,
                                 off=None if median is None else max(kv - median, 0.0) / max(median, 1e-9)))
    return rows
