"""Energy the GPUs used, from their total-energy counters (NVML's total energy
consumption, or dcgm-exporter's `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, read as joules).

Like tokens, energy is summed from counter increases (reset-aware) as samples arrive,
never from power × Δt, and only over stretches infertop watched: a counter's value at
first sight holds energy since the driver loaded, not this session's. One source per node
(the one heard last), so a node read by both NVML and DCGM is not counted twice.
"""

from __future__ import annotations

from infertop.collectors.rates import CounterTrust, step_doubt
from infertop.collectors.sample import NodeSample

# a GPU draws a few kW at most (GB300 superchip < 2 kW): a faster rise is not energy
ENERGY_TRUST = CounterTrust(max_per_s=10_000.0)
J_PER_KWH = 3.6e6


class EnergyTally:
    def __init__(self) -> None:
        # (node, source, GPU index) → (time, joules) of the last reading
        self.last: dict[tuple[str, str, int], tuple[float, float]] = {}
        self.reset_at: dict[tuple[str, str, int], float] = {}
        self.heard_at: dict[tuple[str, str], float] = {}
        self.pending: dict[tuple[str, str], float] = {}

    def observe(self, sample: NodeSample) -> None:
        if sample.error is not None or not sample.gpus:
            return
        source = (sample.node, sample.source)
        for gpu in sample.gpus:
            value = gpu.energy_j_total
            if value is None:
                continue
            self.heard_at[source] = sample.taken_at
            key = (*source, gpu.index)
            prev = self.last.get(key)
            self.last[key] = (sample.taken_at, value)
            if prev is None:
                continue
            doubt = step_doubt(prev[0], prev[1], sample.taken_at, value, ENERGY_TRUST, self.reset_at.get(key))
            if value < prev[1]:
                self.reset_at[key] = sample.taken_at
            if doubt is None:
                # a counter that went down restarted from zero (driver reload): `value` since
                step = value - prev[1] if value >= prev[1] else value
                self.pending[source] = self.pending.get(source, 0.0) + step

    def drain(self) -> dict[str, float]:
        """Joules per node since the last drain, one source per node (nodes that counted)."""
        chosen: dict[str, tuple[float, tuple[str, str]]] = {}
        for source, at in self.heard_at.items():
            if source[0] not in chosen or at > chosen[source[0]][0]:
                chosen[source[0]] = (at, source)
        got = {node: self.pending[s] for node, (_, s) in chosen.items() if s in self.pending}
        self.pending = {}
        return got

    def watched_nodes(self) -> set[str]:
        """Nodes whose energy counter has been read: their energy is counted, not estimated."""
        return {node for node, _ in self.heard_at}
