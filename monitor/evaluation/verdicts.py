"""Verdicts: what the operator is hunting. Conditions are pure; the tracker adds hold/clear.

A condition (see `conditions` and `links`) is what the figures say right now. A verdict
is a condition that has held for its hold time (`thresholds.hold_s`, idle:
`idle_hold_s`); it clears only once the condition has been false for `clear_s`. A
condition that toggles faster than its hold time therefore never shows, and one that
dips for less than the clear time never blinks out.

Status verdicts (stale / unreachable / error) need no hold of their own: the status is
already derived from how many intervals went by without a sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infertop.layouts.model import Layout, NodeConfig, SloConfig, Thresholds
from infertop.monitor.evaluation.acceptance import (
    AcceptanceHistory,
    DraftPools,
    acceptance_drop_condition,
    draft_pools,
    record_history,
)
from infertop.monitor.evaluation.conditions import (
    HEALTH_KINDS,
    IDLE,
    SEVERITY_RANK,
    STATUS_KINDS,
    Condition,
    RolePool,
    blind_condition,
    gpu_error_condition,
    idle_condition,
    role_pools,
    slo_condition,
    status_condition,
    straggler_condition,
    throttled_condition,
)
from infertop.monitor.evaluation.config_drift import config_drift_condition
from infertop.monitor.evaluation.congestion import (
    CongestionPool,
    congested_condition,
    congested_ports,
    congestion_pool,
)
from infertop.monitor.evaluation.gpu_holders import stray_process_condition
from infertop.monitor.evaluation.links import link_condition
from infertop.monitor.evaluation.rank_findings import (
    busy_waiting_condition,
    name_straggler_rank,
    rank_straggler_condition,
)
from infertop.monitor.evaluation.verdict_evidence import with_evidence
from infertop.monitor.snapshot import NodeView, VerdictView

ALL_KINDS = STATUS_KINDS + HEALTH_KINDS


def _pool_cost(pools: Mapping[str, RolePool], role: str) -> float | None:
    pool = pools.get(role)
    return pool.cost_per_hour_usd if pool is not None else None


def node_conditions(
    node: NodeView,
    pools: Mapping[str, RolePool],
    config: NodeConfig | None,
    th: Thresholds,
    now: float,
    ecc_baseline: Mapping[int, int] | None = None,
    slo: SloConfig | None = None,
    drafting: tuple[DraftPools, AcceptanceHistory] | None = None,
    congestion: CongestionPool | None = None,
) -> list[Condition]:
    """Every condition true of `node` now. A node that is not `ok` yields only its status:
    its figures are old, and what they say is no longer evidence. `pools`: `role_pools`
    of every node this tick (computed once, not per node); `drafting`: the tick's
    `draft_pools` and the tracker's acceptance history (None: acceptance not judged);
    `congestion`: the ports' baseline of every node this tick (`congestion_pool`)."""
    if node.status != "ok":
        # unknown: its figures are old and its backend says why: nothing to judge
        status = status_condition(node, now)
        return [status] if status is not None else []
    found = [
        idle_condition(node, th),
        # a port the congested verdict names is its evidence, not link-starved's too
        link_condition(node, config, th, skip=congested_ports(node, congestion, th)),
        congested_condition(node, congestion, th),
        # a restart's dip is marked as such (restart_marks.py), not called slow
        None if node.restarted_at is not None else (
            name_straggler_rank(node, straggler_condition(node, pools.get(node.role), th))
            or rank_straggler_condition(node, th, _pool_cost(pools, node.role))),
        throttled_condition(node, th),
        gpu_error_condition(node, ecc_baseline or {}),
        slo_condition(node, slo),
        blind_condition(node, th),
        busy_waiting_condition(node, th),
        stray_process_condition(node),
        config_drift_condition(node),
        None if drafting is None else acceptance_drop_condition(node, *drafting, th, now),
    ]
    return [c for c in found if c is not None]


def verdict_sort_key(v: VerdictView) -> tuple[bool, int, float]:
    """Established before pending, worst first, then the most money at stake (unknown
    money last)."""
    stake = v.usd_per_hour_at_stake
    return (
        v.pending,
        SEVERITY_RANK.get(v.severity, len(SEVERITY_RANK)),
        -(stake if stake is not None else -1.0),
    )


def node_hunt_key(node: NodeView) -> tuple[int, float]:
    """A node's place in the hunt, smaller first: its worst established verdict's
    severity, then the dollars per hour its verdicts put at stake (most first). A node
    without a verdict comes after every node with one. The viewers sort by it."""
    verdicts = [v for v in node.verdicts if not v.pending]
    if not verdicts:
        return (len(SEVERITY_RANK), 0.0)
    worst = min(SEVERITY_RANK.get(v.severity, len(SEVERITY_RANK)) for v in verdicts)
    stake = sum(v.usd_per_hour_at_stake or 0.0 for v in verdicts)
    return (worst, -stake)


def hunt_order(nodes: Sequence[NodeView]) -> list[tuple[NodeView, VerdictView]]:
    """Every verdict of every node, in the order the operator should look at them."""
    pairs = [(n, v) for n in nodes for v in n.verdicts]
    pairs.sort(key=lambda p: (*verdict_sort_key(p[1]), p[0].name, p[1].kind))
    return pairs


def hold_and_clear_s(kind: str, th: Thresholds) -> tuple[float, float]:
    if kind in STATUS_KINDS:
        return 0.0, 0.0
    return (th.idle_hold_s if kind == IDLE else th.hold_s), th.clear_s


@dataclass
class _Track:
    seen_at: float  # first tick of the current run of "true": the hold counts from here
    last: Condition
    active: bool = False
    false_since: float | None = None

    @property
    def since(self) -> float:
        return self.last.since if self.last.since is not None else self.seen_at


class VerdictTracker:
    """Holds the state that turns momentary conditions into verdicts (hold / clear times).

    Also remembers each GPU's uncorrected-ECC total when first seen, so that a rise
    during the session is told apart from errors counted before infertop watched.
    """

    def __init__(self) -> None:
        self._tracks: dict[tuple[str, str], _Track] = {}
        self._ecc_baseline: dict[str, dict[int, int]] = {}
        #: each node's draft acceptance over its last hour (the acceptance-drop verdict)
        self.acceptance = AcceptanceHistory()
        #: also show conditions still within their hold time, marked `pending` — for a
        #: one-shot snapshot whose window can be shorter than the hold (never the TUI)
        self.report_pending = False
        #: (node, verdict) pairs that became active on the latest `apply`
        self.started: list[tuple[str, VerdictView]] = []

    def _update_ecc(self, node: NodeView) -> dict[int, int]:
        base = self._ecc_baseline.setdefault(node.name, {})
        for gpu in node.gpus:
            total = gpu.ecc_uncorrected_total
            if total is None:
                continue
            # a total below the baseline means the counter was reset (driver reload)
            if gpu.index not in base or total < base[gpu.index]:
                base[gpu.index] = total
        return base

    def _observe(self, key: tuple[str, str], cond: Condition | None, th: Thresholds, now: float) -> None:
        hold, clear = hold_and_clear_s(key[1], th)
        track = self._tracks.get(key)
        if cond is not None:
            if track is None:
                track = self._tracks[key] = _Track(seen_at=now, last=cond)
            track.last = cond
            track.false_since = None
            if not track.active and now - track.seen_at >= hold:
                track.active = True
                self.started.append((key[0], self._view(track)))
            return
        if track is None:
            return
        if not track.active:
            del self._tracks[key]  # toggled off before the hold: never shown
            return
        if track.false_since is None:
            track.false_since = now
        if now - track.false_since >= clear:
            del self._tracks[key]

    @staticmethod
    def _view(track: _Track, now: float | None = None) -> VerdictView:
        """The verdict of an active track; with `now`, the pending view of one still held."""
        c = track.last
        return VerdictView(
            kind=c.kind,
            detail=c.detail,
            severity=c.severity,
            since=track.since,
            usd_per_hour_at_stake=c.usd_per_hour_at_stake,
            pending=now is not None,
            held_s=None if now is None else max(0.0, now - track.seen_at),
            evidence=list(c.evidence),
            trend=c.trend,
        )

    def apply(self, nodes: Sequence[NodeView], layout: Layout, now: float) -> list[NodeView]:
        th = layout.thresholds
        configs = {n.name: n for n in layout.nodes}
        self.started = []
        present = {n.name for n in nodes}
        for key in [k for k in self._tracks if k[0] not in present]:
            del self._tracks[key]
        out = []
        pools = role_pools(nodes)
        record_history(nodes, self.acceptance, th, now)
        drafting = (draft_pools(nodes, th), self.acceptance)
        congestion = congestion_pool(nodes)
        for node in nodes:
            baseline = self._update_ecc(node)
            found = node_conditions(node, pools, configs.get(node.name), th, now, baseline, layout.slo,
                                    drafting, congestion)
            conds = {c.kind: c for c in found}
            ok = node.status == "ok"
            for kind in STATUS_KINDS:
                self._observe((node.name, kind), conds.get(kind), th, now)
            for kind in HEALTH_KINDS:
                if ok:
                    self._observe((node.name, kind), conds.get(kind), th, now)
                    continue
                # a node that is not answering tells nothing either way: keep what was
                # established (hidden until it answers), forget what was only pending
                track = self._tracks.get((node.name, kind))
                if track is not None and not track.active:
                    del self._tracks[(node.name, kind)]
            shown = ALL_KINDS if ok else STATUS_KINDS
            verdicts = [
                self._view(t) if t.active else self._view(t, now)
                for kind in shown
                if (t := self._tracks.get((node.name, kind))) is not None
                and (t.active or self.report_pending)
            ]
            verdicts.sort(key=verdict_sort_key)
            out.append(node.model_copy(update={"verdicts": verdicts}))
        return with_evidence(out, th)
