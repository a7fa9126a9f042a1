"""Why a straggler is slow: its figures ranked against the median of its pool (issue 35).

In a lockstep expert-parallel group every rank waits for the slowest, so the question at
3 a.m. is not only "which" but "why". Beside a straggler verdict this lists the figures
that could slow a rank — clocks and clock-event reasons, power cap, temperature, XID /
ECC, NVLink and NIC errors, and the real activity of its GPUs (the rank computing while
the others wait works hardest) — each with the median of the pool's other busy nodes,
most telling first. Where the verdict names a rank, the GPU figures are that rank's GPUs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from infertop.monitor.evaluation.clock_events import POWER_CAP, THROTTLE_MASK
from infertop.monitor.evaluation.conditions import engine_busy
from infertop.monitor.evaluation.engine_ranks import gpu_span
from infertop.monitor.evaluation.rank_findings import straggling_rank
from infertop.monitor.snapshot import EvidenceView, GpuView, NodeView

Figure = Callable[[NodeView, Sequence[GpuView]], float | None]


def _known(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _min(values: Sequence[float | None]) -> float | None:
    known = _known(values)
    return min(known) if known else None


def _max(values: Sequence[float | None]) -> float | None:
    known = _known(values)
    return max(known) if known else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = _known(values)
    return sum(known) / len(known) if known else None


def _count(gpus: Sequence[GpuView], test: Callable[[GpuView], bool | None]) -> float | None:
    """The share of `gpus` (percent) for which `test` holds: a rank's one GPU and a peer
    node's eight compare as shares, never as counts ("1 vs 8" read as fewer)."""
    seen = [test(g) for g in gpus]
    known = [s for s in seen if s is not None]
    return 100.0 * sum(1 for s in known if s) / len(known) if known else None


def _bits(mask: int) -> Callable[[GpuView], bool | None]:
    return lambda g: None if g.clock_event_reasons is None else bool(g.clock_event_reasons & mask)


def _nic_errors(node: NodeView, _: Sequence[GpuView]) -> float | None:
    rates = _known([r for n in node.nics for r in (n.errors_per_s, n.rx_errors_per_s, n.tx_errors_per_s,
                                                  n.link_integrity_errors_per_s, n.link_recoveries_per_s)])
    return sum(rates) if rates else None


def _nvlink_down(_: NodeView, gpus: Sequence[GpuView]) -> float | None:
    known = [(g.nvlink_links_total or 0) - (g.nvlink_links_up or 0) for g in gpus
             if g.nvlink_links_total is not None and g.nvlink_links_up is not None]
    return float(sum(known)) if known else None


# (figure, unit, worse when "low" | "high", how to read it off a node and the GPUs in question)
FIGURES: tuple[tuple[str, str, str, Figure], ...] = (
    ("decode steps/s", "/s", "low",
     lambda n, _: n.engine.decode_steps_per_s if n.engine is not None else None),
    ("slowest SM clock", "MHz", "low", lambda n, gs: _min([g.sm_clock_mhz for g in gs])),
    ("GPUs power-capped", "% of GPUs", "high", lambda n, gs: _count(gs, _bits(POWER_CAP))),
    ("GPUs throttled (clock events)", "% of GPUs", "high", lambda n, gs: _count(gs, _bits(THROTTLE_MASK))),
    ("lowest GPU power", "W", "low", lambda n, gs: _min([g.power_w for g in gs])),
    ("hottest GPU", "°C", "high", lambda n, gs: _max([g.temp_c for g in gs])),
    ("SM activity (mean)", "%", "high", lambda n, gs: _mean([g.sm_active_pct for g in gs])),
    ("GPUs with an XID", "% of GPUs", "high", lambda n, gs: _count(gs, lambda g: None if g.xid_last is None
                                                                  else g.xid_last != 0)),
    ("uncorrected ECC errors", "", "high",
     lambda n, gs: (lambda v: float(sum(v)) if v else None)(_known([g.ecc_uncorrected_total for g in gs]))),
    ("NVLink links down", "links", "high", _nvlink_down),
    ("NIC errors", "/s", "high", _nic_errors),
)


NODE_FIGURES = ("decode steps/s", "NIC errors")  # the node's, not its rank's GPUs'


def _off(value: float | None, median: float | None, worse: str) -> float | None:
    if value is None or median is None:
        return None
    gap = (median - value) if worse == "low" else (value - median)
    return max(gap, 0.0) / max(abs(median), 1.0)


def straggler_evidence(node: NodeView, pool: Sequence[NodeView]) -> list[EvidenceView]:
    """`node`'s figures beside the median of `pool`'s other busy, answering nodes."""
    peers = [p for p in pool if p.name != node.name and p.status == "ok" and engine_busy(p)]
    rank = straggling_rank(node)
    mine = [g for g in node.gpus if rank.gpus and g.index in rank.gpus] if rank is not None and rank.gpus \
        else list(node.gpus)
    # the rows read off the named rank's GPUs say which ("GPU 5: slowest SM clock")
    where = f"{gpu_span(rank.gpus)}: " if rank is not None and rank.gpus else ""
    out = []
    for figure, unit, worse, read in FIGURES:
        value = read(node, mine)
        theirs = _known([read(p, p.gpus) for p in peers])
        median = statistics.median(theirs) if theirs else None
        if value is None and median is None:
            continue
        off = _off(value, median, worse)
        named = f"{where}{figure}" if where and figure not in NODE_FIGURES else figure
        out.append(EvidenceView(figure=named, unit=unit, value=value, median=median, off=off))
    out.sort(key=lambda e: -(e.off if e.off is not None else -1.0))
    return out
