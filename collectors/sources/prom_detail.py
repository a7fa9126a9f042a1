"""Which nodes' detail the `prom` source reads this tick: the one rule (issue 48).

A node's detail is its per-GPU series (dcgm-exporter, one series per GPU and figure: ~100
of the ~480 series a node answers through the recorded rules). Every node's engine and
host figures are read every tick; the per-GPU ones on a large fleet only for

- the nodes a viewer has in view (a hint the monitor passes down, never a viewer reading),
- the nodes flagged: a node with a verdict asks for its own detail every tick until the
  verdict clears (its evidence is per GPU: idle, throttled, busy-waiting, XID, …),
- a rotation that reaches every node within `bound_s`: the fleet in equal slices, one a tick,
  after a first tick that reads every node (so that every node has its per-GPU figures from
  the start: a `snapshot --window 10` sees a few ticks, not a whole rotation).

A fleet of at most SMALL_FLEET_NODES reads everything every tick, as before: a small
cluster sees no change. Pure (no I/O): tested with plain data.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

# up to this many nodes every node's detail is read every tick
SMALL_FLEET_NODES = 64
# every node's detail within this many seconds (the rotation's whole cycle)
DETAIL_EVERY_S = 30.0


@dataclass(frozen=True)
class DetailPlan:
    """The nodes whose detail one tick reads; `nodes` None: every node."""

    nodes: frozenset[str] | None
    total: int  # nodes in the fleet
    every_s: float | None  # the longest a node goes without fresh detail (None: every tick)
    wanted: int = 0  # nodes read because they are in view or flagged
    rotation: int = 0  # nodes read because the rotation reached them

    @property
    def count(self) -> int:
        return self.total if self.nodes is None else len(self.nodes)


def plan_detail(
    nodes: Sequence[str],
    tick: int,
    interval_s: float,
    wanted: Collection[str] = (),
    *,
    bound_s: float = DETAIL_EVERY_S,
    small: int = SMALL_FLEET_NODES,
) -> DetailPlan:
    """The nodes whose detail tick number `tick` reads. `nodes`: the fleet in a stable
    order; `wanted`: those in view or flagged (read every tick; names outside `nodes` are
    ignored). Tick 0 reads every node. The rotation cuts the fleet into as many slices
    as whole intervals fit in `bound_s` and reads slice `tick mod slices`, so every
    node's detail is at most `slices × interval_s` (≤ `bound_s`) old when the source
    keeps its cadence."""
    total = len(nodes)
    slices = max(1, math.floor(bound_s / interval_s + 1e-9)) if interval_s > 0 else 1
    if total <= small or slices == 1:
        return DetailPlan(None, total, None)
    if tick == 0:
        return DetailPlan(None, total, slices * interval_s)
    size = math.ceil(total / slices)
    start = (tick % slices) * size
    rotation = frozenset(nodes[start:start + size])
    fleet = set(nodes)
    extra = frozenset(n for n in wanted if n in fleet)
    return DetailPlan(rotation | extra, total, slices * interval_s,
                      wanted=len(extra), rotation=len(rotation - extra))

