"""The fleet map's view model: one state per node, judged in monitor/, and its groups."""

from __future__ import annotations

import pytest

from infertop.monitor.fleet_map import MAP_STATES, map_groups, node_map_state
from infertop.monitor.snapshot import NodeView, VerdictView


def node(name: str, status: str = "ok", verdicts: tuple[tuple[str, str], ...] = (), role: str = "decode",
         group: str | None = None, pending: bool = False) -> NodeView:
    return NodeView(name=name, role=role, status=status, group=group,  # type: ignore[arg-type]
                    verdicts=[VerdictView(kind=k, detail="d", severity=s, pending=pending)  # type: ignore[arg-type]
                              for k, s in verdicts])


@pytest.mark.parametrize(("status", "verdicts", "state"), [
    ("ok", (), "ok"),
    ("ok", (("idle", "info"),), "info"),
    ("ok", (("blind", "warning"),), "blind"),
    ("ok", (("blind", "warning"), ("idle", "warning")), "warning"),  # known trouble over unknown
    ("ok", (("straggler", "warning"), ("link-starved", "critical")), "critical"),
    ("stale", (("link-starved", "critical"),), "stale"),  # old figures: their verdicts are old too
    ("unreachable", (("unreachable", "critical"),), "unreachable"),
    ("error", (), "error"),
])
def test_a_node_has_one_state(status: str, verdicts: tuple[tuple[str, str], ...], state: str) -> None:
    assert node_map_state(node("n", status, verdicts)) == state


def test_a_pending_verdict_is_not_yet_a_state() -> None:
    assert node_map_state(node("n", verdicts=(("straggler", "critical"),), pending=True)) == "ok"


def test_every_status_is_a_state() -> None:
    for status in ("ok", "stale", "unreachable", "error"):
        assert node_map_state(node("n", status)) in MAP_STATES


def test_groups_keep_layout_order_and_cells_follow_the_sort() -> None:
    nodes = [
        node("p1", role="prefill", group="r1"),
        node("d1", group="r1"), node("d2", group="r2", verdicts=(("idle", "warning"),)),
        node("d3", group="r1", status="stale"),
    ]
    groups = map_groups(nodes, order=["d3", "d2", "d1", "p1"])
    assert [(g.pool, g.group, [c.name for c in g.cells]) for g in groups] == [
        ("prefill", "r1", ["p1"]), ("decode", "r1", ["d3", "d1"]), ("decode", "r2", ["d2"]),
    ]
    assert groups[1].counts() == {"stale": 1, "ok": 1}
    assert groups[1].worst == "stale"
    # a filtered-out group is not drawn at all
    assert [g.group for g in map_groups(nodes[1:2])] == ["r1"]
