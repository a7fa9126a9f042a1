"""The acceptance-drop verdict: a drafter that stopped agreeing with its target, priced.

Every drafted token that is rejected is decode capacity paid for and lost: a step of a
speculative engine costs about the same whether its draft is accepted or not, and makes
1 + (accepted draft tokens) tokens per request. A node's (or a rank's) draft acceptance
over the window is judged against two levels:

- its pool: the median acceptance of the *other* busy, answering nodes of its role that
  draft the same way — the same drafting method and draft length (k), as the engine's
  config says where served (`speculative.*` settings) and the number of per-position
  counters it serves (one per configured draft token); engines whose method is not
  served are pooled with each other;
- its own recent level: the median of its own window acceptances over the last
  `acceptance_own_span_s` (an hour), once that history covers `acceptance_own_min_s`.

It is a condition when it is under `acceptance_drop_ratio` × either level (and the node
drafts at least `acceptance_min_draft_tokens_per_s`); the tracker holds it for `hold_s`.

The money. Over the window the node drafted D tokens/s and accepted a share a of them,
making T output tokens/s. At the reference acceptance a_ref (the pool's median where the
pool is what it fell below, else its own level) the same steps would have accepted
D × a_ref, so it would make T_ref = T + D × (a_ref − a) tokens/s. The share of its
capacity lost is (T_ref − T) / T_ref, and the $/h at stake is the node's $/h times that
(a rank: times its share of the node's GPUs too).

The history is the only state: `AcceptanceHistory`, kept by the verdict tracker, one
point per `NODE_STEP_S` per node (a rank: per `RANK_STEP_S`), bounded to the span.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.conditions import ACCEPTANCE_DROP, Condition, engine_busy
from infertop.monitor.snapshot import (
    EngineRankView,
    EvidenceView,
    NodeView,
    TrendPointView,
    TrendView,
)

NODE_STEP_S = 10.0  # one history point per node per this many seconds at most
RANK_STEP_S = 60.0  # ranks: coarser (8 a node, 1,000s in a cluster)
TREND_POINTS = 120  # the last 20 minutes of a node's points travel with its verdict
# settings that say how an engine drafts, where it serves them (info gauges)
METHOD_SETTINGS = ("speculative.method", "spec.method", "sglang.speculative_algorithm")
LENGTH_SETTINGS = ("speculative.num_speculative_tokens", "sglang.speculative_num_draft_tokens")

DraftingKey = tuple[str, str | None, int | None]  # (role, method, draft length)


class AcceptanceHistory:
    """Each node's (and rank's) window acceptance, oldest first, over the last span."""

    def __init__(self) -> None:
        self._points: dict[str, tuple[array[float], array[float]]] = {}

    def record(self, key: str, now: float, value: float, step_s: float, span_s: float) -> None:
        times, values = self._points.setdefault(key, (array("d"), array("d")))
        if times and now - times[-1] < step_s:
            return
        times.append(now)
        values.append(value)
        drop = 0
        while drop < len(times) and times[drop] < now - span_s:
            drop += 1
        if drop:
            del times[:drop]
            del values[:drop]

    def level(self, key: str, now: float, min_span_s: float) -> float | None:
        """The median of the key's points, once they span `min_span_s`; else None."""
        found = self._points.get(key)
        if not found or not found[0] or now - found[0][0] < min_span_s:
            return None
        return statistics.median(found[1])

    def trend(self, key: str, points: int = TREND_POINTS) -> list[TrendPointView]:
        found = self._points.get(key)
        if not found:
            return []
        times, values = found
        return [TrendPointView(at=t, value=v) for t, v in zip(times[-points:], values[-points:], strict=True)]

    def keep_only(self, nodes: Iterable[str]) -> None:
        """Forget nodes no longer in the fleet (their ranks with them)."""
        kept = set(nodes)
        for key in [k for k in self._points if k.split("\0", 1)[0] not in kept]:
            del self._points[key]


def rank_history_key(node: str, rank: EngineRankView) -> str:
    return f"{node}\0{rank.key}"


def drafting_method(node: NodeView) -> str | None:
    settings = (node.engine.settings if node.engine is not None else None) or {}
    return next((settings[k] for k in METHOD_SETTINGS if settings.get(k)), None)


def draft_length(node: NodeView) -> int | None:
    """Draft tokens per draft: the per-position counters served (one per configured
    token), else the engine's setting where served."""
    e = node.engine
    if e is None:
        return None
    if e.acceptance_by_position:
        return len(e.acceptance_by_position)
    for key in LENGTH_SETTINGS:
        text = (e.settings or {}).get(key, "")
        if text.isascii() and text.isdigit() and len(text) <= 3:
            return int(text)
    return None


def drafting_key(node: NodeView) -> DraftingKey:
    return (node.role, drafting_method(node), draft_length(node))


def drafting_text(key: DraftingKey) -> str:
    _, method, length = key
    how = method if method is not None else "drafting method not served"
    if length is not None:
        how += f", {length} draft token{'s' if length != 1 else ''}"
    return how


def judged(node: NodeView, th: Thresholds) -> bool:
    """A node whose acceptance means something now: answering, busy, drafting enough."""
    e = node.engine
    return (
        node.status == "ok" and e is not None and e.draft_acceptance is not None and engine_busy(node)
        and e.draft_tokens_per_s is not None and e.draft_tokens_per_s >= th.acceptance_min_draft_tokens_per_s
    )


@dataclass(frozen=True)
class DraftPools:
    """Judged nodes by drafting key, computed once a tick."""

    members: Mapping[DraftingKey, Sequence[NodeView]]

    def peers(self, node: NodeView) -> list[NodeView]:
        return [n for n in self.members.get(drafting_key(node), ()) if n.name != node.name]


def draft_pools(nodes: Sequence[NodeView], th: Thresholds) -> DraftPools:
    members: dict[DraftingKey, list[NodeView]] = {}
    for n in nodes:
        if judged(n, th):
            members.setdefault(drafting_key(n), []).append(n)
    return DraftPools(members)


def record_history(nodes: Sequence[NodeView], history: AcceptanceHistory, th: Thresholds, now: float) -> None:
    """Each judged node's (and rank's) acceptance now into its history."""
    history.keep_only(n.name for n in nodes)
    for n in nodes:
        if not judged(n, th):
            continue
        assert n.engine is not None and n.engine.draft_acceptance is not None
        history.record(n.name, now, n.engine.draft_acceptance, NODE_STEP_S, th.acceptance_own_span_s)
        for r in n.engine.ranks or ():
            drafting = (r.draft_tokens_per_s or 0) >= th.acceptance_min_draft_tokens_per_s
            if r.draft_acceptance is not None and drafting:
                history.record(rank_history_key(n.name, r), now, r.draft_acceptance, RANK_STEP_S,
                               th.acceptance_own_span_s)


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


@dataclass(frozen=True)
class _Judged:
    """One acceptance (a node's or a rank's) against its two levels."""

    acceptance: float
    draft_tokens_per_s: float
    tokens_per_s: float | None
    pool: float | None
    own: float | None
    ratio: float

    def below(self, level: float | None) -> bool:
        return level is not None and level > 0 and self.acceptance < self.ratio * level

    @property
    def dropped(self) -> bool:
        return self.below(self.pool) or self.below(self.own)

    @property
    def reference(self) -> float:
        """The level it is priced against: its pool's where it fell below that."""
        for level in (self.pool, self.own):
            if level is not None and self.below(level):
                return level
        known = [v for v in (self.pool, self.own) if v is not None]
        return known[0] if known else self.acceptance

    @property
    def tokens_at_reference(self) -> float | None:
        if self.tokens_per_s is None:
            return None
        return self.tokens_per_s + self.draft_tokens_per_s * max(self.reference - self.acceptance, 0.0)

    @property
    def lost_share(self) -> float | None:
        at_ref = self.tokens_at_reference
        if at_ref is None or at_ref <= 0 or self.tokens_per_s is None:
            return None
        return (at_ref - self.tokens_per_s) / at_ref


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f} %"


def _levels_text(j: _Judged, peers: int, how: str) -> str:
    parts = []
    if j.pool is not None:
        parts.append(f"pool median {_pct(j.pool)} ({peers} other node{'s' if peers != 1 else ''}, {how})")
    else:
        parts.append(f"no pool to compare ({how})")
    parts.append(f"its own last hour {_pct(j.own)}" if j.own is not None
                 else "its own last hour not yet known")
    return " vs " + " and ".join(parts)


def _money_text(j: _Judged, price: float | None, share: float) -> tuple[str, float | None]:
    at_ref, lost = j.tokens_at_reference, j.lost_share
    which = "the pool's" if j.below(j.pool) else "its own usual"
    if at_ref is None or lost is None or j.tokens_per_s is None:
        return f"; at {which} acceptance: decode tokens/s unknown", None
    text = f"; at {which} acceptance it would make {at_ref:,.0f} decode tokens/s, not {j.tokens_per_s:,.0f}"
    if price is None:
        return text + " (node price unknown)", None
    stake = price * share * lost
    return text + f": ${stake:,.2f}/h of its ${price * share:,.2f}/h lost", stake


def _evidence(
    node: NodeView, peers: Sequence[NodeView], j: _Judged, rank: EngineRankView | None = None
) -> tuple[EvidenceView, ...]:
    """The judged figure (the node's, or its `rank`'s) beside its levels and the pool's."""
    e = node.engine if rank is None else rank
    assert e is not None
    rows = [
        EvidenceView(figure="draft acceptance", unit="%", value=j.acceptance * 100,
                     median=None if j.pool is None else j.pool * 100,
                     off=None if j.pool is None else max(j.pool - j.acceptance, 0.0) / max(j.pool, 1e-9)),
        EvidenceView(figure="draft acceptance, its own last hour", unit="%", value=j.acceptance * 100,
                     median=None if j.own is None else j.own * 100,
                     off=None if j.own is None else max(j.own - j.acceptance, 0.0) / max(j.own, 1e-9)),
    ]
    for i, mine in enumerate(e.acceptance_by_position or ()):
        theirs = _median((p.engine.acceptance_by_position or [None] * (i + 1))[i] if p.engine is not None
                         and p.engine.acceptance_by_position and len(p.engine.acceptance_by_position) > i
                         else None for p in peers)
        off = None if mine is None or not theirs else max(theirs - mine, 0.0) / theirs
        rows.append(EvidenceView(figure=f"accepted at draft position {i + 1}", unit="%",
                                 value=None if mine is None else mine * 100,
                                 median=None if theirs is None else theirs * 100, off=off))
    length = _median(p.engine.mean_acceptance_length for p in peers if p.engine is not None)
    rows.append(EvidenceView(figure="mean acceptance length", unit="tokens", value=e.mean_acceptance_length,
                             median=length))
    rows.append(EvidenceView(figure="decode tokens/s accepted", unit="/s", value=j.tokens_per_s,
                             median=j.tokens_at_reference))
    return tuple(rows)


def acceptance_drop_condition(
    node: NodeView, pools: DraftPools, history: AcceptanceHistory, th: Thresholds, now: float
) -> Condition | None:
    """The node's (else its worst rank's) acceptance well below its pool's or its own."""
    if not judged(node, th):
        return None
    e = node.engine
    assert e is not None and e.draft_acceptance is not None and e.draft_tokens_per_s is not None
    peers = pools.peers(node)
    pool = _median(p.engine.draft_acceptance for p in peers if p.engine is not None)
    own = history.level(node.name, now, th.acceptance_own_min_s)
    key = drafting_key(node)
    how = drafting_text(key)
    mine = _Judged(e.draft_acceptance, e.draft_tokens_per_s, e.accepted_tokens_per_s, pool, own,
                   th.acceptance_drop_ratio)
    trend = TrendView(figure="draft acceptance", unit="%", step_s=NODE_STEP_S,
                      points=history.trend(node.name), reference=pool,
                      reference_label="pool median" if pool is not None else "")
    if mine.dropped:
        detail = f"draft acceptance {_pct(mine.acceptance)}" + _levels_text(mine, len(peers), how)
        money, stake = _money_text(mine, node.cost_per_hour_usd, 1.0)
        apart = _rank_apart(node, th)
        if apart is not None:
            detail += f"; lowest rank {node.name} {apart.label} {_pct(apart.draft_acceptance)}"
        return Condition(ACCEPTANCE_DROP, detail + money, "warning", stake,
                         evidence=_evidence(node, peers, mine), trend=trend)
    worst = _worst_rank(node, pool, history, th, now)
    if worst is None:
        return None
    rank, judged_rank = worst
    share = len(rank.gpus) / len(node.gpus) if rank.gpus and node.gpus else 1.0
    detail = (f"{node.name} {rank.label}: draft acceptance {_pct(judged_rank.acceptance)}"
              + _levels_text(judged_rank, len(peers), how) + f"; the node's {_pct(mine.acceptance)}")
    money, stake = _money_text(judged_rank, node.cost_per_hour_usd, share)
    return Condition(ACCEPTANCE_DROP, detail + money, "warning", stake,
                     evidence=_evidence(node, peers, judged_rank, rank), trend=trend)


def _rank_apart(node: NodeView, th: Thresholds) -> EngineRankView | None:
    """The node's lowest-accepting rank where it stands apart from the node's other ranks
    (under the ratio × their median); None where the ranks fell together."""
    ranks = [r for r in ((node.engine.ranks if node.engine is not None else None) or ())
             if r.draft_acceptance is not None]
    if len(ranks) < 2:
        return None
    worst = min(ranks, key=lambda r: r.draft_acceptance or 0.0)
    others = _median(r.draft_acceptance for r in ranks if r is not worst)
    assert worst.draft_acceptance is not None
    return worst if others and worst.draft_acceptance < th.acceptance_drop_ratio * others else None


def _worst_rank(
    node: NodeView, pool: float | None, history: AcceptanceHistory, th: Thresholds, now: float
) -> tuple[EngineRankView, _Judged] | None:
    """The node's lowest-accepting rank that is itself below the pool's or its own level
    (the pool for a rank: the other nodes' median, else the node's other ranks')."""
    ranks = [r for r in ((node.engine.ranks if node.engine is not None else None) or ())
             if r.draft_acceptance is not None
             and (r.draft_tokens_per_s or 0.0) >= th.acceptance_min_draft_tokens_per_s]
    if len(ranks) < 2:
        return None
    worst = min(ranks, key=lambda r: r.draft_acceptance or 0.0)
    level = pool if pool is not None else _median(r.draft_acceptance for r in ranks if r is not worst)
    assert worst.draft_acceptance is not None and worst.draft_tokens_per_s is not None
    j = _Judged(worst.draft_acceptance, worst.draft_tokens_per_s, worst.accepted_tokens_per_s, level,
                history.level(rank_history_key(node.name, worst), now, th.acceptance_own_min_s),
                th.acceptance_drop_ratio)
    return (worst, j) if j.dropped else None
