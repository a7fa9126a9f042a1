"""A restart marked where its dip shows (issue 46). Pure.

An engine that restarts counts from zero: for as long as the window holds the restart,
the node's rates are made of fewer steps and read low — a dip with no cause in sight.
The timeline already sees every restart, sample by sample (timeline.py); here each node
whose engine restarted within `mark_s` gets an info verdict `restarted` (no hold: the
counter drop is the evidence), so its row carries the mark and the hunt list an entry,
and `NodeView.restarted_at` says when.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from infertop.monitor.evaluation.conditions import RESTARTED
from infertop.monitor.evaluation.timeline import RESTART
from infertop.monitor.format import fmt_age
from infertop.monitor.snapshot import NodeView, TimelineEventView, VerdictView


def mark_s(window_s: float) -> float:
    """How long a restart stays marked: while the window's figures still hold it, and as
    long again for the eye to catch it."""
    return 2 * window_s


def recent_restarts(
    events: Sequence[TimelineEventView], now: float, window_s: float
) -> dict[str, TimelineEventView]:
    """Node → its latest restart event still marked."""
    latest: dict[str, TimelineEventView] = {}
    for event in events:
        if event.kind == RESTART and event.node is not None and now - event.at <= mark_s(window_s):
            latest[event.node] = event
    return latest


def mark_restarts(nodes: Sequence[NodeView], latest: Mapping[str, TimelineEventView]) -> list[NodeView]:
    """`restarted_at` on each node lately restarted, before the verdicts are judged: a
    restart's dip is no straggler (verdicts.node_conditions leaves it out)."""
    return [n.model_copy(update={"restarted_at": latest[n.name].at}) if n.name in latest else n
            for n in nodes]


def with_restart_verdicts(
    nodes: Sequence[NodeView], latest: Mapping[str, TimelineEventView], now: float
) -> list[NodeView]:
    """The `restarted` info verdict on each node lately restarted that answers."""
    out = []
    for node in nodes:
        mark = latest.get(node.name)
        if mark is None or node.status != "ok":
            out.append(node)
            continue
        verdict = VerdictView(
            kind=RESTARTED, severity="info", since=mark.at,
            detail=f"{mark.detail} {fmt_age(max(now - mark.at, 0.0))} ago: figures over the window "
                   "include the dip",
        )
        out.append(node.model_copy(update={"verdicts": [*node.verdicts, verdict]}))
    return out
