"""Blind spots the whole fleet shares: one cluster-level finding, not a warning per node. Pure.

A stock dcgm-exporter (its default counters leave out ECC, clock-event reasons and the
NVLink error counters) makes every node of a cluster blind on the same things for the same
reason. A `blind` verdict on each of them buries the nodes that matter, and says nothing
about any node: none of them differs from its peers. So a coverage gap (`CoverageGap`,
judged in `coverage.py`) that every answering node of a peer group has, with the same
reason, is marked `shared` on the nodes and said once in the cluster view
(`ClusterView.shared_blind_spots`), with the fix where infertop knows it. A node that sees
less than its peers keeps its `blind` verdict for what only it misses.

Peers are the nodes read the same way: the same role and the same sources. The gap must be
on every one of them that answers (status ok); one that does not answer shows no coverage,
so it is no evidence either way, but it still counts as a peer (a pool whose other nodes
went stale does not turn its survivors' shared gaps into their own verdicts). A gap is
the same gap when its kind and its reason are the same: a page that failed names its own
URL, so failures stay on their nodes (a mass event groups them: `mass_events.py`). A group
of one node has no peers: its gaps stay its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertop.collectors.pages.dcgm import DCGM_COUNTERS_DOC, DCGM_UNSEEN_FIELDS
from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.coverage import (
    CLOCK_EVENTS,
    CONGESTION_COUNTERS,
    ENGINE,
    GPUS,
    PORT_SPEED,
    PORTS,
    UNSEEN_LABELS,
)
from infertop.monitor.snapshot import CoverageGap, NodeView, Severity, SharedBlindSpotView

MIN_PEERS = 2  # a gap of a lone node is its own, however it is read

# what a kind is called in the cluster's note ("blind on throttle, ECC, NVLink errors")
KIND_LABELS: dict[str, str] = {
    **UNSEEN_LABELS,
    GPUS: "accelerators",
    PORTS: "ports",
    PORT_SPEED: "port speed",
    ENGINE: "engine figures",
    CLOCK_EVENTS: "throttle",
}

GapKey = tuple[str, str]  # (kind, detail)


def peer_key(node: NodeView) -> tuple[str, tuple[str, ...]]:
    """The nodes read the same way: same role, same sources."""
    return node.role, tuple(node.sources)


def _key(gap: CoverageGap) -> GapKey:
    return gap.kind, gap.detail


def mark_shared(nodes: Sequence[NodeView]) -> list[NodeView]:
    """`nodes` with each coverage gap that all their answering peers (at least
    `MIN_PEERS`) have marked `shared`; a node whose coverage does not change is returned
    as it is (no copy: the usual tick has no gap at all)."""
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    sizes: dict[tuple[str, tuple[str, ...]], int] = {}
    for i, node in enumerate(nodes):
        key = peer_key(node)
        sizes[key] = sizes.get(key, 0) + 1
        if node.status == "ok":
            groups.setdefault(key, []).append(i)
    out = list(nodes)
    for key, members in groups.items():
        # the group counts its members that do not answer now: when most of a pool drops
        # off, what the rest miss alike stays the deployment's, not suddenly theirs
        if sizes[key] < MIN_PEERS:
            continue
        common = {_key(g) for g in nodes[members[0]].coverage}
        for i in members[1:]:
            if not common:
                break
            common &= {_key(g) for g in nodes[i].coverage}
        if not common:
            continue
        # one marked copy of each shared gap for the whole group (views are frozen): at 128
        # nodes a copy per node and gap costs milliseconds a tick
        marked = {_key(g): g.model_copy(update={"shared": True}) for g in nodes[members[0]].coverage
                  if _key(g) in common}
        for i in members:
            node = nodes[i]
            coverage = [marked.get(_key(g), g) for g in node.coverage]
            out[i] = node.model_copy(update={"coverage": coverage})
    return out


def dcgm_fix(gaps: Sequence[CoverageGap]) -> tuple[str | None, list[CoverageGap]]:
    """(the fix for the gaps a dcgm-exporter's counters explain, the gaps it does not
    cover): the fields docs/dcgm-counters.csv switches on, named."""
    fields: list[str] = []
    rest: list[CoverageGap] = []
    for gap in gaps:
        wanted = DCGM_UNSEEN_FIELDS.get(gap.kind)
        if wanted is not None and "dcgm-exporter" in gap.detail:
            fields.extend(f for f in wanted if f not in fields)
        else:
            rest.append(gap)
    if not fields:
        return None, rest
    fix = (f"dcgm-exporter's counters leave out {', '.join(fields)}: add them to its counters CSV "
           f"(see {DCGM_COUNTERS_DOC})")
    return fix, rest


def spot_severity(kinds: Sequence[str]) -> Severity:
    """How a shared blind spot counts (`--fail-on`, the hunt list): a warning, as a node's
    `blind` verdict — unknown is never healthy — except where every gap in it is a RoCE
    congestion counter and some other congestion counter is read: the congested verdict
    still judges from those, and a counter the fleet's exporter cannot serve at all
    (node_exporter has no CNP counter) is a standing limit of the reading, said once as
    info, not a warning every session of such a cluster would carry."""
    congestion = set(CONGESTION_COUNTERS)
    if kinds and set(kinds) <= congestion and len(set(kinds)) < len(congestion):
        return "info"
    return "warning"


def _who(count: int, roles: Sequence[str], sources: Sequence[str], total: int) -> str:
    which = "all " if count == total else ""
    plural = "s" if count != 1 else ""
    return f"{which}{count} {'/'.join(roles)} node{plural} (read by {', '.join(sources) or 'no source'})"


def shared_blind_spots(nodes: Sequence[NodeView], th: Thresholds) -> list[SharedBlindSpotView]:
    """One finding per set of shared gaps (peer groups with the very same shared gaps are
    one finding: a stock dcgm-exporter on the prefill and the decode pool is one fix).
    Gaps the layout acknowledges (`blind_ignore`) are left out, as from the verdict."""
    by_gaps: dict[tuple[GapKey, ...], list[NodeView]] = {}
    gaps_of: dict[tuple[GapKey, ...], list[CoverageGap]] = {}
    for node in nodes:
        if node.status != "ok":
            continue
        shared = [g for g in node.coverage if g.shared and g.kind not in th.blind_ignore]
        if not shared:
            continue
        key = tuple(_key(g) for g in shared)
        by_gaps.setdefault(key, []).append(node)
        gaps_of.setdefault(key, shared)
    out = []
    for key, members in by_gaps.items():
        gaps = gaps_of[key]
        roles = sorted({n.role for n in members})
        sources = sorted({s for n in members for s in n.sources})
        fix, rest = dcgm_fix(gaps)
        labels = ", ".join(dict.fromkeys(KIND_LABELS.get(g.kind, g.kind) for g in gaps))
        reasons = "; ".join([*([fix] if fix else []), *(g.detail for g in rest)])
        out.append(SharedBlindSpotView(
            kinds=[g.kind for g in gaps],
            nodes=len(members),
            roles=roles,
            sources=sources,
            detail="; ".join(g.detail for g in gaps),
            fix=fix,
            note=f"{_who(len(members), roles, sources, len(nodes))} blind on {labels} — {reasons}",
            severity=spot_severity([g.kind for g in gaps]),
        ))
    out.sort(key=lambda b: (-b.nodes, b.note))
    return out
