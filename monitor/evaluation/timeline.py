"""One timeline: what happened on each node and to the cluster, in time order.

Events, each dated when it happened (not when it was noticed, where the evidence says):
- restart: an engine counter went down, or the engine's counters began anew (their
  `_created` / process start moved forward): dated at the first sample after it;
- health: the engine's own health gauge flipped (`vllm:engine_healthy`, where served);
- config-change: an engine setting from its info gauges changed (both values named);
- preemption-burst: a node's preemptions/s rose to `thresholds.preemption_burst_per_s`;
- verdict-onset / verdict-clear: an established verdict began (at its `since`) or ended;
- phase: the session's phase was marked (at the mark's instant).

The tracker keeps state from sample to sample and tick to tick (like the verdict
tracker); what it derives from is plain data. It keeps the latest `MAX_EVENTS`; the
session record keeps every snapshot's list, so a report sees them all.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from infertop.collectors.sample import ENGINE_COUNTER_FIELDS, EngineSample, NodeSample
from infertop.monitor.evaluation.conditions import RESTARTED, STATUS_KINDS
from infertop.monitor.snapshot import NodeView, SessionView, TimelineEventView

MAX_EVENTS = 200
RESTART = "restart"
HEALTH = "health"
CONFIG_CHANGE = "config-change"
PREEMPTION_BURST = "preemption-burst"
VERDICT_ONSET = "verdict-onset"
VERDICT_CLEAR = "verdict-clear"
PHASE = "phase"
# counters whose fall says the engine began anew (the latency sums go with their counts)
_RESTART_COUNTERS = tuple(f for f in ENGINE_COUNTER_FIELDS if not f.endswith(("_sum", "_count")))
# counters' birth moving forward by more than this is a new process, not clock jitter
_BIRTH_SLACK_S = 1.0
MAX_SETTINGS_NAMED = 3


def restart_evidence(before: EngineSample, after: EngineSample) -> str | None:
    """Why `after` comes from a newer engine process than `before`, or None."""
    for name in _RESTART_COUNTERS:
        old, new = getattr(before, name), getattr(after, name)
        if old is not None and new is not None and new < old:
            return f"{name} fell {old:,.0f} → {new:,.0f}"
    born_old, born_new = before.counters_started_at, after.counters_started_at
    if born_old is not None and born_new is not None and born_new > born_old + _BIRTH_SLACK_S:
        return "its counters began anew"
    return None


def settings_change(before: dict[str, str], after: dict[str, str]) -> str | None:
    changed = [
        f"{k} {before.get(k, '—')} → {after.get(k, '—')}"
        for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)
    ]
    if not changed:
        return None
    more = len(changed) - MAX_SETTINGS_NAMED
    return "; ".join(changed[:MAX_SETTINGS_NAMED]) + (f"; +{more} more" if more > 0 else "")


@dataclass
class TimelineTracker:
    burst_per_s: float = 1.0
    events: list[TimelineEventView] = field(default_factory=list)
    _engines: dict[str, EngineSample] = field(default_factory=dict)
    _verdicts: dict[tuple[str, str], float | None] | None = None
    _bursting: set[str] = field(default_factory=set)
    _phase: tuple[str, float] | None = None

    def _add(self, event: TimelineEventView) -> None:
        # in time order: an onset dated at its `since` may come before events seen since
        keys = [e.at for e in self.events]
        self.events.insert(bisect.bisect_right(keys, event.at), event)
        del self.events[:-MAX_EVENTS]

    def observe(self, sample: NodeSample) -> None:
        """Every sample as it arrives (a fleet listener): restarts, health, settings."""
        engine = sample.engine
        if not sample.ok or engine is None:
            return
        before = self._engines.get(sample.node)
        self._engines[sample.node] = engine
        if before is None:
            return
        at, node = sample.taken_at, sample.node
        why = restart_evidence(before, engine)
        if why is not None:
            self._add(TimelineEventView(at=at, kind=RESTART, node=node, detail=f"engine restarted: {why}"))
        if before.healthy is not None and engine.healthy is not None and before.healthy != engine.healthy:
            said = "healthy again" if engine.healthy else "unhealthy"
            self._add(TimelineEventView(at=at, kind=HEALTH, node=node, detail=f"engine says {said}"))
        if before.settings is not None and engine.settings is not None:
            changed = settings_change(before.settings, engine.settings)
            if changed is not None:
                self._add(TimelineEventView(at=at, kind=CONFIG_CHANGE, node=node, detail=changed))

    def update(
        self, nodes: Sequence[NodeView], session: SessionView | None, now: float
    ) -> list[TimelineEventView]:
        """After each tick's verdicts: onsets, clears, bursts and phase marks; the list."""
        self._verdict_events(nodes, now)
        for node in nodes:
            rate = node.engine.preemptions_per_s if node.engine is not None and node.status == "ok" else None
            if rate is not None and rate >= self.burst_per_s > 0:
                if node.name not in self._bursting:
                    self._bursting.add(node.name)
                    self._add(TimelineEventView(at=now, kind=PREEMPTION_BURST, node=node.name,
                                                detail=f"{rate:.1f} preemptions/s"))
            elif rate is not None:
                self._bursting.discard(node.name)
        if session is not None and session.phase_elapsed_s is not None:
            began = now - session.phase_elapsed_s
            if self._phase is None or self._phase[0] != session.phase or abs(self._phase[1] - began) > 1.0:
                self._add(TimelineEventView(at=began, kind=PHASE, detail=f"phase {session.phase}"))
            self._phase = (session.phase, began)
        return list(self.events)

    def _verdict_events(self, nodes: Sequence[NodeView], now: float) -> None:
        current = {
            (n.name, v.kind): (v.since, v.detail)
            # a restart mark is the timeline's own restart event, not news again
            for n in nodes for v in n.verdicts if not v.pending and v.kind != RESTARTED
        }
        previous = self._verdicts or {}
        # a node that does not answer keeps its established verdicts, hidden (the
        # verdict tracker's rule): they have not cleared
        silent = {n.name for n in nodes if n.status != "ok"}
        for key, since in previous.items():
            if key[0] in silent and key[1] not in STATUS_KINDS and key not in current:
                current[key] = (since, "")
        for (node, kind), (since, detail) in current.items():
            if (node, kind) not in previous:
                at = since if since is not None else now
                self._add(TimelineEventView(at=at, kind=VERDICT_ONSET, node=node, detail=f"{kind}: {detail}"))
        for (node, kind) in previous.keys() - current.keys():
            self._add(TimelineEventView(at=now, kind=VERDICT_CLEAR, node=node, detail=f"{kind} cleared"))
        self._verdicts = {k: since for k, (since, _) in current.items()}
