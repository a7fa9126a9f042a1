"""The fleet map's view model: each node's one state, and the nodes grouped as the layout
groups them (pool, then the layout's own group: a `group` key or a `hosts` range).

Pure (no Textual). The state is judged here, from the snapshot's status and verdicts,
so every viewer colours a node alike; a viewer only maps a state to a glyph and colour.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from infertop.monitor.evaluation.conditions import BLIND
from infertop.monitor.snapshot import NodeView

MapState = Literal["error", "unreachable", "critical", "warning", "blind", "stale", "info", "ok"]
# worst first: the order a group's counts and a legend are told in
MAP_STATES: tuple[MapState, ...] = (
    "error", "unreachable", "critical", "warning", "blind", "stale", "info", "ok",
)
STATE_RANK: dict[MapState, int] = {s: i for i, s in enumerate(MAP_STATES)}


def node_map_state(node: NodeView) -> MapState:
    """One state for a node: a status that is not ok says it all (its figures are old or
    missing, so its verdicts are too); else its worst established verdict, where `blind`
    (unknown is never healthy) ranks under a warning that is known trouble."""
    if node.status == "unknown":  # unseen: its backend is down (unknown is never healthy)
        return "blind"
    if node.status != "ok":
        return node.status
    worst: MapState = "ok"
    for verdict in node.verdicts:
        if verdict.pending:
            continue
        state: MapState
        if verdict.severity == "critical":
            state = "critical"
        elif verdict.kind == BLIND:
            state = "blind"
        elif verdict.severity == "warning":
            state = "warning"
        else:
            state = "info"
        if STATE_RANK[state] < STATE_RANK[worst]:
            worst = state
    return worst


@dataclass(frozen=True)
class MapCell:
    name: str
    state: MapState


@dataclass(frozen=True)
class MapGroup:
    pool: str  # the node role
    group: str | None  # the layout's group within the pool; None: the pool is one group
    cells: tuple[MapCell, ...]

    def counts(self) -> dict[MapState, int]:
        """How many of its nodes are in each state, worst first; absent states left out."""
        found: dict[MapState, int] = {}
        for cell in self.cells:
            found[cell.state] = found.get(cell.state, 0) + 1
        return {s: found[s] for s in MAP_STATES if s in found}

    @property
    def worst(self) -> MapState:
        return min((c.state for c in self.cells), key=STATE_RANK.__getitem__, default="ok")


def map_groups(nodes: Sequence[NodeView], order: Iterable[str] | None = None) -> list[MapGroup]:
    """The nodes in groups: pools in the order they first appear, and within a pool its
    groups likewise. `order`: node names in the order to place cells within a group (the
    table's sort); None keeps the order of `nodes`."""
    by_name = {n.name: n for n in nodes}
    names = list(order) if order is not None else [n.name for n in nodes]
    # groups appear in layout order, whatever the sort: the map keeps its shape
    keys: dict[tuple[str, str | None], list[MapCell]] = {}
    for node in nodes:
        keys.setdefault((node.role, node.group), [])
    for name in names:
        found = by_name.get(name)
        if found is not None:
            keys[(found.role, found.group)].append(MapCell(found.name, node_map_state(found)))
    pools: dict[str, list[MapGroup]] = {}
    for (pool, group), cells in keys.items():
        if cells:
            pools.setdefault(pool, []).append(MapGroup(pool, group, tuple(cells)))
    return [g for groups in pools.values() for g in groups]
