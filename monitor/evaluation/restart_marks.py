"""A restart marked where its dip shows (issue 46). Pure.

An engine that restarts counts from zero: for as long as the window holds the restart,
the node's rates are made of fewer steps and read low — a dip with no cause in sight.
The timeline already sees every restart, sample by sample (timeline.py); here each node
whose engine restarted within `mark_s` gets an info verdict `restarted` (no hold: the
counter drop is the evidence), so its row carries the mark and the hunt list an entry,
and `NodeView.restarted_at` says when.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertop.monitor.evaluation.conditions import RESTARTED
from infertop.monitor.evaluation.timeline import RESTART
from infertop.monitor.format import fmt_age
from infertop.monitor.snapshot import NodeView, TimelineEventView, VerdictView


def mark_s(window_s: float) -> float:
    """How long a restart stays marked: while the window's figures still hold it, and as
    long again for the eye to catch it."""
    return 2 * window_s


def with_restart_marks(
    nodes: Sequence[NodeView], events: Sequence[TimelineEventView], now: float, window_s: float
) -> list[NodeView]:
    latest: dict[str, TimelineEventView] = {}
    for event in events:
        if event.kind == RESTART and event.node is not None and now - event.at <= mark_s(window_s):
            latest[event.node] = event
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
        out.append(node.model_copy(update={"restarted_at": mark.at, "verdicts": [*node.verdicts, verdict]}))
    return out
