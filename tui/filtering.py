"""The `/` filter, k9s style: a case-insensitive substring of a node's name, role,
STATUS (its standing: ok, judging, reading, warning, critical, stale, unreachable, error;
monitor.evaluation.judging) or verdict kinds; a leading `!` keeps the nodes that do NOT
match, so `!ok` is every node that is not answering, judged and free of warnings.

Several words must all match (``decode stale`` = decode nodes that are stale).
"""

from __future__ import annotations

from dataclasses import dataclass

from infertop.monitor.snapshot import NodeView
from infertop.tui.columns import standing


@dataclass(frozen=True)
class NodeFilter:
    terms: tuple[str, ...] = ()
    inverted: bool = False

    @classmethod
    def parse(cls, query: str) -> NodeFilter:
        query = query.strip()
        inverted = query.startswith("!")
        if inverted:
            query = query[1:]
        return cls(tuple(t.lower() for t in query.split()), inverted)

    @property
    def active(self) -> bool:
        return bool(self.terms)

    def matches(self, node: NodeView) -> bool:
        if not self.terms:
            return True
        fields = [node.name.lower(), node.role.lower(), standing(node).lower()]
        fields += [v.kind.lower() for v in node.verdicts]
        hit = all(any(term in f for f in fields) for term in self.terms)
        return hit != self.inverted

    def describe(self) -> str:
        if not self.terms:
            return ""
        return ("!" if self.inverted else "") + " ".join(self.terms)
