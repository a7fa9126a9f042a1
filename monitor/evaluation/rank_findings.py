"""Findings at the level of a rank: which engine of a node, on which GPUs.

- busy-waiting: GPUs whose utilisation says busy while SM activity says their SMs are
  not working (a kernel resident and spinning: an all-to-all, an NCCL wait). Not work,
  and not idle either: named with the rank that holds the GPU.
- the straggler's rank: a node slow against its role peers is named down to its rank
  ("decode-05 engine 3 (GPUs 6–7)"): the slowest busy rank, or where the ranks step in
  lockstep (the same steps/s), the one whose GPUs compute while the others wait (the
  highest SM activity); a node whose own ranks differ (one well below the median of the
  node's busy ranks) is a straggler by itself.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.activity import busy_but_waiting
from infertop.monitor.evaluation.conditions import (
    BUSY_WAITING,
    STRAGGLER,
    Condition,
    accel_label,
    engine_busy,
)
from infertop.monitor.evaluation.engine_ranks import LOCKSTEP_SPREAD
from infertop.monitor.snapshot import EngineRankView, GpuView, NodeView


def _ranks(node: NodeView) -> list[EngineRankView]:
    return list(node.engine.ranks or ()) if node.engine is not None else []


def rank_of_gpu(node: NodeView, index: int) -> EngineRankView | None:
    return next((r for r in _ranks(node) if r.gpus and index in r.gpus), None)


def _mean_activity(rank: EngineRankView, gpus: Sequence[GpuView]) -> float | None:
    mine = set(rank.gpus or ())
    values = [g.sm_active_pct for g in gpus if g.index in mine and g.sm_active_pct is not None]
    return sum(values) / len(values) if values else None


def _busy(rank: EngineRankView) -> bool:
    return any(v is not None and v > 0 for v in (rank.decode_steps_per_s, rank.requests_running,
                                                 rank.accepted_tokens_per_s))


def straggling_rank(node: NodeView) -> EngineRankView | None:
    """The rank that holds the node back, or None when the node has fewer than two busy
    ranks or nothing tells them apart."""
    busy = [r for r in _ranks(node) if _busy(r) and r.decode_steps_per_s is not None]
    if len(busy) < 2:
        return None
    steps = [r.decode_steps_per_s or 0.0 for r in busy]
    slowest = min(busy, key=lambda r: r.decode_steps_per_s or 0.0)
    if max(steps) > 0 and (max(steps) - min(steps)) / max(steps) > LOCKSTEP_SPREAD:
        return slowest
    # lockstep: the one computing while the others wait
    active = [(a, r) for r in busy if (a := _mean_activity(r, node.gpus)) is not None]
    if len(active) < 2:
        return None
    top, rank = max(active, key=lambda p: p[0])
    others = statistics.median(a for a, r in active if r is not rank)
    return rank if top > others * 1.25 + 1.0 else None


def rank_name(node: NodeView, rank: EngineRankView) -> str:
    return f"{node.name} {rank.label}"


def rank_straggler_condition(
    node: NodeView, th: Thresholds, pool_cost_per_hour_usd: float | None = None
) -> Condition | None:
    """One rank of the node well below the median of the node's busy ranks. Its stake is
    the straggler's: under lockstep expert parallelism the whole group waits for it, so
    the role pool's $/h × (1 − ratio) (`pool_cost_per_hour_usd`; None: unknown)."""
    if node.status != "ok" or not engine_busy(node):
        return None
    busy = [r for r in _ranks(node) if _busy(r) and r.decode_steps_per_s is not None]
    if len(busy) < th.straggler_min_nodes:
        return None
    median = statistics.median(r.decode_steps_per_s or 0.0 for r in busy)
    slowest = min(busy, key=lambda r: r.decode_steps_per_s or 0.0)
    mine = slowest.decode_steps_per_s or 0.0
    if median <= 0 or mine / median >= th.straggler_ratio:
        return None
    cost = pool_cost_per_hour_usd
    return Condition(
        STRAGGLER,
        f"{rank_name(node, slowest)}: {mine:.1f} decode steps/s, {mine / median * 100:.0f} % of the "
        f"median of the node's {len(busy)} busy engines ({median:.1f})",
        "warning", cost * (1 - mine / median) if cost is not None else None,
    )


def name_straggler_rank(node: NodeView, condition: Condition | None) -> Condition | None:
    """A node-level straggler condition with its rank named, where the ranks tell."""
    if condition is None:
        return None
    rank = straggling_rank(node)
    if rank is None:
        return condition
    how = f"{rank.decode_steps_per_s:.1f} steps/s" if rank.decode_steps_per_s is not None else ""
    detail = f"{condition.detail}; slowest rank {rank_name(node, rank)} {how}".rstrip()
    stake = condition.usd_per_hour_at_stake
    return Condition(condition.kind, detail, condition.severity, stake, condition.since)


def busy_waiting_condition(node: NodeView, th: Thresholds) -> Condition | None:
    waiting = [g for g in node.gpus if busy_but_waiting(g, th.busy_util_pct, th.waiting_activity_pct)]
    if not waiting:
        return None
    parts: list[str] = []
    by_rank: dict[str, list[GpuView]] = {}
    for gpu in waiting:
        rank = rank_of_gpu(node, gpu.index)
        by_rank.setdefault(rank_name(node, rank) if rank is not None else "", []).append(gpu)
    label = accel_label(waiting[0].kind)
    for name, gpus in by_rank.items():
        idx = ",".join(str(g.index) for g in gpus)
        util = max(g.util_pct or 0.0 for g in gpus)
        active = max(g.sm_active_pct or 0.0 for g in gpus)
        where = f"{name}: " if name else ""
        plural = "s" if len(gpus) > 1 else ""
        parts.append(f"{where}{label}{plural} {idx} util {util:.0f} % but SM active {active:.0f} %")
    cost = node.cost_per_hour_usd
    stake = cost * len(waiting) / len(node.gpus) if cost is not None and node.gpus else None
    return Condition(BUSY_WAITING, "busy but waiting — " + "; ".join(parts), "warning", stake)
