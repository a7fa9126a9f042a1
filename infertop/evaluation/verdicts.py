"""Verdicts: what the operator is hunting. Conditions are pure; the tracker adds hold/clear.

Only status verdicts (stale / unreachable / error) exist so far; idle, link-starved,
straggler, throttled and gpu-error come with the verdicts issue.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertop.view import NodeView, VerdictView
from layouts.model import Layout


def status_verdicts(node: NodeView) -> list[VerdictView]:
    if node.status == "ok":
        return []
    age = f"no fresh sample for {node.age_s:.0f} s" if node.age_s is not None else "never answered"
    detail = f"{age}: {node.error}" if node.error else age
    severity = "warning" if node.status == "stale" else "critical"
    return [VerdictView(kind=node.status, detail=detail, severity=severity)]


class VerdictTracker:
    """Holds the state that turns momentary conditions into verdicts (hold / clear times)."""

    def apply(self, nodes: Sequence[NodeView], layout: Layout, now: float) -> list[NodeView]:
        return [n.model_copy(update={"verdicts": status_verdicts(n)}) for n in nodes]
