"""The congestion pool's baseline (a node's median over its role peers' port figures, itself
left out) is the plain median of those values, found without gathering them per node."""

from __future__ import annotations

import statistics
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.monitor.evaluation.congestion import CongestionPool

ROLES = ("prefill", "decode")
FIGURES = ("pause_rx", "ecn")

node_figures = st.fixed_dictionaries({}, optional={
    f: st.lists(st.integers(0, 30).map(float), max_size=4) for f in FIGURES})
pools = st.dictionaries(st.sampled_from([f"n{i}" for i in range(12)]),
                        st.tuples(st.sampled_from(ROLES), node_figures), max_size=12)


def plain_median(by_node: dict[str, Any], name: str, role: str, figure: str) -> float | None:
    values = [v for other, (r, figs) in by_node.items() if r == role and other != name
              for v in figs.get(figure, ())]
    return statistics.median(values) if values else None


@settings(max_examples=300, deadline=None)
@given(pools)
def test_the_baseline_is_the_peers_median(by_node: dict[str, Any]) -> None:
    pool = CongestionPool(by_node)
    for name in [*by_node, "absent"]:
        for role in ROLES:
            node: Any = SimpleNamespace(name=name, role=role)
            for figure in (*FIGURES, "unread"):
                assert pool.median(node, figure) == plain_median(by_node, name, role, figure)
