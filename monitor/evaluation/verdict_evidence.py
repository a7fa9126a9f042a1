"""Evidence for every verdict kind: rows that name the GPU, port, rank or setting the
verdict names, each beside its pool's figure (issue 46). Pure.

A verdict whose condition brought its own rows (acceptance-drop, congested) keeps them; a
straggler's are ranked in straggler_evidence.py; the other kinds get theirs here, from
the very node view the condition judged, so the rows can never contradict the verdict:
the GPUs a throttled verdict names are the GPUs whose clock-event reasons throttle, the
GPUs of a busy-waiting verdict those busy but waiting, and so on. The pool is the node's
role peers that answer (the node itself left out); a per-GPU figure's median is over
their GPUs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.activity import busy_but_waiting
from infertop.monitor.evaluation.clock_events import POWER_CAP, THROTTLE_MASK
from infertop.monitor.evaluation.conditions import (
    BUSY_WAITING,
    CONFIG_DRIFT,
    GPU_ERROR,
    IDLE,
    LINK_STARVED,
    SLO,
    STRAGGLER,
    STRAY_PROCESS,
    THROTTLED,
    accel_label,
)
from infertop.monitor.evaluation.rank_findings import straggling_rank
from infertop.monitor.evaluation.straggler_evidence import straggler_evidence
from infertop.monitor.snapshot import EvidenceView, GpuView, NicView, NodeView


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _off(value: float | None, median: float | None, worse: str) -> float | None:
    if value is None or median is None:
        return None
    gap = (median - value) if worse == "low" else (value - median)
    return max(gap, 0.0) / max(abs(median), 1.0)


def _row(figure: str, unit: str, value: float | None, median: float | None,
         worse: str = "high") -> EvidenceView:
    return EvidenceView(figure=figure, unit=unit, value=value, median=median, off=_off(value, median, worse))


GpuFigure = tuple[str, str, str, Callable[[GpuView], float | None]]
GPU_FIGURES: dict[str, GpuFigure] = {
    "clock": ("SM clock", "MHz", "low", lambda g: g.sm_clock_mhz),
    "temp": ("temperature", "°C", "high", lambda g: g.temp_c),
    "power": ("power", "W", "low", lambda g: g.power_w),
    "util": ("util", "%", "high", lambda g: g.util_pct),
    "sm": ("SM active", "%", "low", lambda g: g.sm_active_pct),
}


def _gpu_rows(gpus: Sequence[GpuView], peers: Sequence[NodeView], keys: Sequence[str]) -> list[EvidenceView]:
    """Per named GPU, each figure beside the median of the pool's GPUs."""
    rows = []
    for key in keys:
        name, unit, worse, read = GPU_FIGURES[key]
        median = _median([read(g) for p in peers for g in p.gpus])
        rows += [_row(f"{accel_label(g.kind)} {g.index} {name}", unit, read(g), median, worse)
                 for g in gpus if read(g) is not None or median is not None]
    return rows


def _rank_line(node: NodeView, gpus: Sequence[GpuView]) -> list[EvidenceView]:
    """The engine on the named GPUs, its steps/s beside the median of the node's other
    busy ranks: a slow rank and its GPU are one line."""
    e = node.engine
    if e is None or not e.ranks:
        return []
    named = {g.index for g in gpus}
    out = []
    for rank in e.ranks:
        if rank.gpus and named & set(rank.gpus):
            others = _median([r.decode_steps_per_s for r in e.ranks if r is not rank and r.requests_running])
            out.append(_row(f"{rank.label} steps/s", "/s", rank.decode_steps_per_s, others, "low"))
    return out


def throttled_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    mask = THROTTLE_MASK if th.throttle_on_power_cap else THROTTLE_MASK & ~POWER_CAP
    gpus = [g for g in node.gpus if (g.clock_event_reasons or 0) & mask]
    return _gpu_rows(gpus, peers, ("clock", "temp", "power")) + _rank_line(node, gpus)


def busy_waiting_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    gpus = [g for g in node.gpus if busy_but_waiting(g, th.busy_util_pct, th.waiting_activity_pct)]
    return _gpu_rows(gpus, peers, ("util", "sm")) + _rank_line(node, gpus)


def idle_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    def running(n: NodeView) -> float | None:
        return n.engine.requests_running if n.engine is not None else None

    def util(n: NodeView) -> float | None:
        return n.gpu_util_pct

    return [_row("mean GPU util", "%", util(node), _median([util(p) for p in peers]), "low"),
            _row("requests running", "", running(node), _median([running(p) for p in peers]), "low")]


def _port_rows(nic: NicView, peers: Sequence[NodeView]) -> list[EvidenceView]:
    same = [q for p in peers for q in p.nics if q.name == nic.name]
    speed = 0.0 if nic.up is False else nic.speed_gbps
    rows = [_row(f"{nic.name} speed", "Gb/s", speed, _median([q.speed_gbps for q in same if q.up]), "low")]
    traffic = [v for v in (nic.rx_bytes_per_s, nic.tx_bytes_per_s) if v is not None]
    theirs = _median([max(t) * 8 / 1e9 for q in same
                      if (t := [v for v in (q.rx_bytes_per_s, q.tx_bytes_per_s) if v is not None])])
    if traffic or theirs is not None:
        rows.append(_row(f"{nic.name} traffic", "Gb/s", max(traffic) * 8 / 1e9 if traffic else None, theirs))
    return rows


def link_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    """Every port the verdict can name: down, slow, degraded bond, or carrying traffic."""
    rows = []
    for nic in node.nics:
        if nic.kind == "loopback":
            continue
        if nic.up is False or nic.slow or (nic.members and nic.members_up is not None
                                           and nic.members_up < len(nic.members)):
            rows += _port_rows(nic, peers)
    if not rows:  # a pile-up or a busy port: the ports by traffic, busiest first
        fabric = [n for n in node.nics if n.kind != "loopback" and n.up is not False]
        fabric.sort(key=lambda n: -max(n.rx_bytes_per_s or 0.0, n.tx_bytes_per_s or 0.0))
        for nic in fabric[:4]:
            rows += _port_rows(nic, peers)
    for gpu in node.gpus:
        up = [g.nvlink_links_up for g in node.gpus if g.nvlink_links_up is not None]
        if gpu.nvlink_links_up is not None and up and gpu.nvlink_links_up < max(up):
            rows.append(_row(f"{accel_label(gpu.kind)} {gpu.index} NVLinks up", "", gpu.nvlink_links_up,
                             max(up), "low"))
    return rows


def gpu_error_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    rows = []
    for g in node.gpus:
        if g.xid_last:
            rows.append(_row(f"{accel_label(g.kind)} {g.index} last XID", "", g.xid_last, None))
        if g.ecc_uncorrected_total:
            rows.append(_row(f"{accel_label(g.kind)} {g.index} uncorrected ECC", "", g.ecc_uncorrected_total,
                             _median([q.ecc_uncorrected_total for p in peers for q in p.gpus])))
    if node.gpus_expected and len(node.gpus) < node.gpus_expected:
        rows.append(_row("GPUs visible", "", len(node.gpus), node.gpus_expected, "low"))
    return rows


def stray_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    rows = []
    for g in node.gpus:
        held = [p for p in g.processes or () if p.gpu_mem_bytes]
        if len(held) > 1:
            rows.append(_row(f"{accel_label(g.kind)} {g.index} processes holding it", "", len(held),
                             _median([len(q.processes or ()) for p in peers for q in p.gpus])))
    return rows


def drift_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    """A row per drifted setting: the node's value beside the pool's."""
    return [EvidenceView(figure=f"setting {d.setting}", value_text=d.value,
                         median_text=f"{d.pool_value} ({d.pool_agreeing} of {d.pool_reporting})")
            for d in node.config_drift]


def slo_evidence(node: NodeView, peers: Sequence[NodeView], th: Thresholds) -> list[EvidenceView]:
    rows = []
    for field, label in (("ttft_p99_s", "TTFT p99"), ("itl_p99_s", "ITL p99")):
        mine = getattr(node.engine, field) if node.engine is not None else None
        theirs = _median([getattr(p.engine, field) if p.engine is not None else None for p in peers])
        rows.append(_row(label, "s", mine, theirs))
    return rows


Builder = Callable[[NodeView, Sequence[NodeView], Thresholds], list[EvidenceView]]
BUILDERS: dict[str, Builder] = {
    THROTTLED: throttled_evidence,
    BUSY_WAITING: busy_waiting_evidence,
    IDLE: idle_evidence,
    LINK_STARVED: link_evidence,
    GPU_ERROR: gpu_error_evidence,
    STRAY_PROCESS: stray_evidence,
    CONFIG_DRIFT: drift_evidence,
    SLO: slo_evidence,
}


def with_evidence(nodes: Sequence[NodeView], th: Thresholds) -> list[NodeView]:
    """The nodes, each verdict carrying its evidence rows (those its condition brought
    kept as they are)."""
    out = []
    for node in nodes:
        if not node.verdicts:
            out.append(node)
            continue
        peers = [n for n in nodes if n.role == node.role and n.name != node.name and n.status == "ok"]
        verdicts = []
        for v in node.verdicts:
            rows: list[EvidenceView] | None = None
            if not v.evidence and v.kind == STRAGGLER:
                rank = straggling_rank(node)
                gpus = [g for g in node.gpus if rank is not None and rank.gpus and g.index in rank.gpus]
                rows = straggler_evidence(node, [node, *peers]) + _rank_line(node, gpus)
            elif not v.evidence and v.kind in BUILDERS:
                rows = BUILDERS[v.kind](node, peers, th)
            verdicts.append(v.model_copy(update={"evidence": rows}) if rows else v)
        out.append(node.model_copy(update={"verdicts": verdicts}))
    return out
