"""Momentary conditions behind the verdicts: pure functions of node views and the layout.

A condition says "this is true of the node right now, and here is the evidence". It is
not yet a verdict: `verdicts.VerdictTracker` turns conditions into verdicts once they
have held for their hold time (and drops them once false for the clear time), so a
noisy figure never makes a verdict flap. Nothing here keeps state or reads a clock.

Money at stake (the hunt list's second sort key):
- idle, throttled, gpu-error, link-starved, stale/unreachable/error: what the node (or
  its affected share) costs per hour — paid for, not delivering.
- blind: none. What cannot be seen has no known price; the hunt list puts it after the
  warnings whose money is known.
- straggler: in expert parallelism every rank waits for the slowest, so the whole role
  pool runs at the straggler's pace: pool $/h × (1 − its steps/s ÷ the median) — also for
  a rank slow within its node (rank_findings.py). `STAKE_RULES` says each kind's in words.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infertop.collectors.rates import total
from infertop.layouts.model import SloConfig, Thresholds
from infertop.monitor.evaluation.activity import work_pct
from infertop.monitor.evaluation.clock_events import POWER_CAP, THROTTLE_MASK, throttle_names
from infertop.monitor.evaluation.goodput import ShareBounds, misses_p99
from infertop.monitor.snapshot import EvidenceView, NodeView, Severity, TrendView

IDLE = "idle"
LINK_STARVED = "link-starved"
STRAGGLER = "straggler"
THROTTLED = "throttled"
GPU_ERROR = "gpu-error"
SLO = "slo"
BLIND = "blind"
BUSY_WAITING = "busy-waiting"  # util high, real activity low (monitor/evaluation/rank_findings.py)
STRAY_PROCESS = "stray-process"  # a GPU held by a process not the engine (gpu_holders.py)
CONFIG_DRIFT = "config-drift"  # monitor/evaluation/config_drift.py
ACCEPTANCE_DROP = "acceptance-drop"  # draft acceptance well below its pool's or its own (acceptance.py)
CONGESTED = "congested"  # the node's own ports well above its pool's baseline (congestion.py)
RESTARTED = "restarted"  # info: its engine restarted lately (restart_marks.py; no hold)
STATUS_KINDS = ("stale", "unreachable", "error")
HEALTH_KINDS = (
    IDLE, LINK_STARVED, CONGESTED, STRAGGLER, THROTTLED, GPU_ERROR, SLO, BLIND,
    BUSY_WAITING, STRAY_PROCESS, CONFIG_DRIFT, ACCEPTANCE_DROP,
)
# the kinds whose evidence is per GPU (or per rank): a node holding one asks for its
# detail every tick where a source reads detail for only some nodes (collectors/sources/prom_detail.py)
DETAIL_KINDS = frozenset({IDLE, STRAGGLER, THROTTLED, GPU_ERROR, BUSY_WAITING, STRAY_PROCESS})

# Each kind's $/h at stake as docs/verdicts.md's table states it, word for word (a test
# holds the table to this and each condition's figure to the formula).
NODE_STAKE = "the node's $/h"
STAKE_RULES: dict[str, str] = {
    IDLE: NODE_STAKE,
    LINK_STARVED: NODE_STAKE,
    CONGESTED: NODE_STAKE,
    STRAGGLER: ("the role pool's $/h × (1 − ratio), ratio = its steps/s ÷ the median (a rank slow within "
                "its node: ÷ the median of the node's busy ranks): under lockstep expert parallelism the "
                "whole group waits for the slowest"),
    THROTTLED: "the node's $/h × throttled GPUs ÷ its GPUs",
    GPU_ERROR: NODE_STAKE,
    BUSY_WAITING: "the node's $/h × busy-but-waiting GPUs ÷ its GPUs",
    STRAY_PROCESS: "the node's $/h × GPUs held by another process ÷ its GPUs",
    CONFIG_DRIFT: "—",
    ACCEPTANCE_DROP: ("the node's $/h × the share of its decode capacity lost (a rank: × its share of the "
                      "node's GPUs)"),
    SLO: "—",
    BLIND: "none (unknown)",
    RESTARTED: "—",
    **dict.fromkeys(STATUS_KINDS, NODE_STAKE),
}

SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Condition:
    kind: str
    detail: str
    severity: Severity
    usd_per_hour_at_stake: float | None = None
    # when the evidence itself dates the condition (a status: the last good sample)
    since: float | None = None
    # figures beside the pool's, and the judged figure over time, where the kind has them
    evidence: tuple[EvidenceView, ...] = ()
    trend: TrendView | None = None


def accel_label(kind: str) -> str:
    return "NPU" if kind == "npu" else "GPU"


def _indices(label: str, indices: Sequence[int]) -> str:
    plural = "s" if len(indices) > 1 else ""
    return f"{label}{plural} {','.join(str(i) for i in indices)}"


def status_condition(node: NodeView, now: float) -> Condition | None:
    # unknown: its backend's finding, not the node's; a node still being read for the
    # first time is not late yet (judging.WarmUp)
    if node.status in ("ok", "unknown") or node.standing == "reading":
        return None
    age = f"no fresh sample for {node.age_s:.0f} s" if node.age_s is not None else "never answered"
    detail = f"{age}: {node.error}" if node.error else age
    severity: Severity = "warning" if node.status == "stale" else "critical"
    since = now - node.age_s if node.age_s is not None else None
    return Condition(node.status, detail, severity, node.cost_per_hour_usd, since)


def engine_busy(node: NodeView) -> bool:
    """The engine shows work in flight or done over the window."""
    e = node.engine
    if e is None:
        return False
    return any(
        v is not None and v > 0
        for v in (e.requests_running, e.decode_steps_per_s, e.accepted_tokens_per_s,
                  e.prompt_tokens_per_s)
    )


def idle_condition(node: NodeView, th: Thresholds) -> Condition | None:
    # SM activity where a GPU reports it, else util (activity.py); the evidence says which
    utils = [w for g in node.gpus if (w := work_pct(g)) is not None]
    e = node.engine
    if engine_busy(node):
        return None
    if utils:
        if max(utils) >= th.idle_util_pct:
            return None
        label = accel_label(node.gpus[0].kind)
        basis = "SM activity" if node.idle_basis == "sm_active" else (
            "util / SM activity" if node.idle_basis and "+" in node.idle_basis else "util")
        evidence = f"{len(utils)} {label}s at ≤ {max(utils):.0f} % {basis}"
    elif e is not None and e.requests_running is not None:
        # no GPU figures: only an engine that is demonstrably doing nothing counts
        evidence = "engine reports no work"
    else:
        return None
    if e is not None and e.requests_running is not None:
        evidence += f", {e.requests_running:.0f} running requests"
    cost = node.cost_per_hour_usd
    if cost is not None:
        evidence += f"; ${cost:,.2f}/h idle"
    return Condition(IDLE, evidence, "warning", cost)


def _steps(node: NodeView) -> float | None:
    return node.engine.decode_steps_per_s if node.engine is not None else None


@dataclass(frozen=True)
class RolePool:
    """What a straggler is measured against: its role's busy nodes, computed once a tick."""

    median_steps_per_s: float | None
    reporting: int  # busy, answering nodes with a steps/s figure
    cost_per_hour_usd: float | None  # the whole pool's, idle nodes included


def role_pools(nodes: Sequence[NodeView]) -> dict[str, RolePool]:
    """Per role: the median decode steps/s of its busy nodes and the pool's $/h.

    An engine with nothing to do is idle, not slow: it stays out of the median.
    """
    steps: dict[str, list[float]] = {}
    costs: dict[str, list[float | None]] = {}
    for n in nodes:
        costs.setdefault(n.role, []).append(n.cost_per_hour_usd)
        mine = _steps(n)
        if n.status == "ok" and mine is not None and engine_busy(n):
            steps.setdefault(n.role, []).append(mine)
    return {
        role: RolePool(
            median_steps_per_s=statistics.median(steps[role]) if steps.get(role) else None,
            reporting=len(steps.get(role, ())),
            cost_per_hour_usd=total(role_costs),
        )
        for role, role_costs in costs.items()
    }


# Decode ranks of an expert-parallel group step together, so a slow one holds back all;
# a prefill node's step rate follows its prompt arrivals and says nothing of its health.
STRAGGLER_ROLES = ("decode", "mixed")


def straggler_condition(node: NodeView, pool: RolePool | None, th: Thresholds) -> Condition | None:
    """Decode steps/s well below the median of the node's role peers (never an idle one)."""
    mine = _steps(node)
    if node.role not in STRAGGLER_ROLES or pool is None or node.status != "ok":
        return None
    if mine is None or not engine_busy(node):
        return None
    median = pool.median_steps_per_s
    if pool.reporting < th.straggler_min_nodes or median is None or median <= 0:
        return None
    ratio = mine / median
    if ratio >= th.straggler_ratio:
        return None
    cost = pool.cost_per_hour_usd
    stake = cost * (1 - ratio) if cost is not None else None
    detail = (
        f"{mine:.1f} decode steps/s, {ratio * 100:.0f} % of the {node.role} median "
        f"{median:.1f} ({pool.reporting} nodes)"
    )
    balance = node.engine.expert_balancedness if node.engine is not None else None
    if balance is not None:
        # SGLang's EPLB metric: uneven expert load on this rank is one cause to look at
        detail += f"; expert load balance {balance * 100:.0f} % (mean ÷ max)"
    return Condition(STRAGGLER, detail, "warning", stake)


def throttled_condition(node: NodeView, th: Thresholds) -> Condition | None:
    mask = THROTTLE_MASK if th.throttle_on_power_cap else THROTTLE_MASK & ~POWER_CAP
    by_reasons: dict[str, list[int]] = {}
    for gpu in node.gpus:
        bits = (gpu.clock_event_reasons or 0) & mask
        if bits:
            names = "+".join(throttle_names(bits))
            by_reasons.setdefault(names, []).append(gpu.index)
    if not by_reasons:
        return None
    label = accel_label(node.gpus[0].kind)
    detail = "; ".join(f"{_indices(label, idx)} {names}" for names, idx in by_reasons.items())
    affected = sum(len(idx) for idx in by_reasons.values())
    cost = node.cost_per_hour_usd
    stake = cost * affected / len(node.gpus) if cost is not None else None
    return Condition(THROTTLED, detail, "warning", stake)


def gpu_error_condition(node: NodeView, ecc_baseline: Mapping[int, int]) -> Condition | None:
    """XID, uncorrected ECC errors since watching began, a lost or missing GPU.

    `ecc_baseline` maps a GPU index to its uncorrected-ECC total when first seen: errors
    counted before infertop watched are history, a rise during the session is news.
    """
    reasons: list[str] = []
    for gpu in node.gpus:
        label = f"{accel_label(gpu.kind)} {gpu.index}"
        if gpu.healthy is False or gpu.error:
            reasons.append(f"{label} lost" + (f" ({gpu.error})" if gpu.error else ""))
        if gpu.xid_last:  # dcgm-exporter reports 0 for "no XID"
            reasons.append(f"{label} XID {gpu.xid_last}")
        base = ecc_baseline.get(gpu.index)
        if gpu.ecc_uncorrected_total is not None and base is not None and gpu.ecc_uncorrected_total > base:
            reasons.append(f"{label} +{gpu.ecc_uncorrected_total - base} uncorrected ECC")
    expected = node.gpus_expected
    if expected and 0 < len(node.gpus) < expected:
        label = accel_label(node.gpus[0].kind)
        reasons.append(f"{len(node.gpus)} of {expected} {label}s visible")
    if not reasons:
        return None
    return Condition(GPU_ERROR, "; ".join(reasons), "critical", node.cost_per_hour_usd)


def slo_condition(node: NodeView, slo: SloConfig | None) -> Condition | None:
    """The node's p99 TTFT or ITL over the window is past the layout's `[slo]` target, by
    the one rule for a share within a target (`goodput.misses_p99`): at most fewer than
    99 % within — the p99's whole bucket past the target; a bucket that straddles it is
    never called a miss. The evidence names the p99's bucket and the share within."""
    e = node.engine
    if slo is None or e is None:
        return None
    misses = []
    for name, label, target, low, high in (
        ("ttft", "TTFT", slo.ttft_p99_s, e.slo_ttft_attainment, e.slo_ttft_attainment_high),
        ("itl", "ITL", slo.itl_p99_s, e.slo_itl_attainment, e.slo_itl_attainment_high),
    ):
        if target is None or low is None or high is None or not misses_p99(ShareBounds(low, high)):
            continue
        bounds = e.latency_bounds_s.get(f"{name}_p99")
        p99 = "" if bounds is None else (
            f" p99 {bounds[0] * 1e3:,.4g}{'' if bounds[1] is None else f'–{bounds[1] * 1e3:,.4g}'} ms"
        )
        within = f"{low * 100:.1f}" + ("" if high == low else f"–{high * 100:.1f}")
        misses.append(f"{label}{p99} > target {target * 1e3:,.4g} ms, {within}% within")
    if not misses:
        return None
    return Condition(SLO, "; ".join(misses), "warning")


def blind_condition(node: NodeView, th: Thresholds) -> Condition | None:
    """What the layout expects of the node that no source sees now (`NodeView.coverage`,
    judged in `coverage.py`): unknown is never healthy. Its reasons, most important first;
    gaps the layout acknowledges (`blind_ignore`) stay on the node but raise nothing, and
    so do gaps every peer shares (`shared`: one cluster-level finding, `shared_gaps.py`)."""
    gaps = [g for g in node.coverage if g.kind not in th.blind_ignore and not g.shared]
    if not gaps:
        return None
    return Condition(BLIND, "; ".join(g.detail for g in gaps), "warning")
