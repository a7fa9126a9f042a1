"""Wall-clock cadence: every source reads at the same instants, the monitor evaluates between.

Sources read at whole multiples of the interval (…:00.0, :01.0, … on the wall clock) and
the monitor ticks half an interval later. Every node's newest reading is then about half
an interval old at each tick, whatever the number of nodes, and all nodes' figures in one
frame describe the same moment (which comparisons like "straggler" rely on). Unaligned,
N readers drift to random phases and the oldest newest reading approaches a full interval.
"""

from __future__ import annotations

TICK_PHASE = 0.5  # the monitor evaluates this share of an interval after the readings


def delay_to_boundary(
    interval_s: float, now: float, offset_s: float = 0.0, min_delay_s: float = 0.0
) -> float:
    """Seconds from `now` to the next instant k·interval + offset, at least `min_delay_s` away."""
    delay = interval_s - (now - offset_s) % interval_s
    # float `%` can return the divisor itself (e.g. -1e-300 % 1.0 == 1.0): never a 0 delay
    while delay < min_delay_s or delay <= 0:
        delay += interval_s
    return delay
