"""What a recording says node by node: incidents (verdict runs) and per-node totals.

The ledger keeps the session's money; the recorded snapshots keep everything else. A
report reads an evenly spaced sample of them (every tick for sessions up to
`MAX_SNAPSHOTS` ticks, so a 3-hour trial at 1 s is read whole) and integrates over the
time each sampled snapshot stands for. An incident is one run of a verdict on a node:
it starts at the verdict's own `since` (when its condition began, hold time included),
ends at the first sampled snapshot without it (or is still open at the end), and costs
its `usd_per_hour_at_stake` × its duration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infertop.monitor.record.recording import Recording
from infertop.monitor.snapshot import Snapshot

MAX_SNAPSHOTS = 12_000


@dataclass
class Incident:
    node: str
    kind: str
    severity: str
    start: float
    end: float | None = None  # None: still open when the recording ends
    last_seen: float = 0.0
    usd_per_hour_at_stake: float | None = None  # the latest the verdict said
    detail: str = ""

    def duration_s(self, recording_end: float) -> float:
        return max(0.0, (self.end if self.end is not None else recording_end) - self.start)

    def usd_at_stake(self, recording_end: float) -> float | None:
        """$ at stake × duration: what the incident cost while it lasted."""
        if self.usd_per_hour_at_stake is None:
            return None
        return self.usd_per_hour_at_stake * self.duration_s(recording_end) / 3600.0


@dataclass
class NodeTotals:
    idle_spend_usd: float = 0.0
    output_tokens: float = 0.0
    util_weighted: float = 0.0  # Σ util × dt over the time util was known
    util_s: float = 0.0
    verdict_s: float = 0.0  # time with at least one established verdict
    seen_s: float = 0.0

    @property
    def mean_util_pct(self) -> float | None:
        return self.util_weighted / self.util_s if self.util_s > 0 else None


@dataclass
class Scan:
    incidents: list[Incident] = field(default_factory=list)
    nodes: dict[str, NodeTotals] = field(default_factory=dict)
    snapshots_read: int = 0
    ticks: int = 0
    end: float = 0.0


def _sample_ids(ids: list[int], limit: int) -> list[int]:
    if len(ids) <= limit:
        return ids
    step = len(ids) / limit
    return [ids[int(i * step)] for i in range(limit)] + [ids[-1]]


def scan(rec: Recording, max_snapshots: int = MAX_SNAPSHOTS) -> Scan:
    out = Scan(ticks=len(rec.ticks))
    if not rec.ticks:
        return out
    at_of = {t.id: t.at for t in rec.ticks}
    ids = _sample_ids([t.id for t in rec.ticks], max_snapshots)
    frames: list[tuple[float, Snapshot]] = []
    for tick_id in ids:
        snap = rec.snapshot(tick_id)
        if snap is not None:
            frames.append((at_of[tick_id], snap))
    out.snapshots_read = len(frames)
    out.end = rec.ticks[-1].at
    open_runs: dict[tuple[str, str], Incident] = {}
    for i, (at, snap) in enumerate(frames):
        # each frame stands for the time until the next one (the last for none)
        dt_s = frames[i + 1][0] - at if i + 1 < len(frames) else 0.0
        present: set[tuple[str, str]] = set()
        for node in snap.nodes:
            totals = out.nodes.setdefault(node.name, NodeTotals())
            totals.seen_s += dt_s
            if node.cost_per_hour_usd is not None and node.idle_fraction is not None:
                totals.idle_spend_usd += node.cost_per_hour_usd * node.idle_fraction * dt_s / 3600.0
            if node.engine is not None and node.engine.accepted_tokens_per_s is not None:
                totals.output_tokens += node.engine.accepted_tokens_per_s * dt_s
            if node.gpu_util_pct is not None:
                totals.util_weighted += node.gpu_util_pct * dt_s
                totals.util_s += dt_s
            established = [v for v in node.verdicts if not v.pending]
            if established:
                totals.verdict_s += dt_s
            for v in established:
                key = (node.name, v.kind)
                present.add(key)
                run = open_runs.get(key)
                if run is None:
                    run = Incident(node.name, v.kind, v.severity, v.since if v.since is not None else at)
                    open_runs[key] = run
                    out.incidents.append(run)
                run.last_seen = at
                run.detail = v.detail
                if v.usd_per_hour_at_stake is not None:
                    run.usd_per_hour_at_stake = v.usd_per_hour_at_stake
        for key in [k for k in open_runs if k not in present]:
            open_runs.pop(key).end = at  # gone by this frame
    out.incidents.sort(key=lambda r: (r.start, r.node, r.kind))
    return out
