"""Wall-clock cadence: every source reads at the same instants, the monitor evaluates between.

Sources read at whole multiples of the interval (…:00.0, :01.0, … on the wall clock) and
the monitor ticks half an interval later, or once the polls of that instant are in if they
take longer (at most TICK_LATEST_PHASE of an interval after it). Every node's newest
reading is then well under an interval old at each tick, whatever the number of nodes,
and all nodes' figures in one frame describe the same moment (which comparisons like
"straggler" rely on). Unaligned, N readers drift to random phases and the oldest newest
reading approaches a full interval.
"""

from __future__ import annotations

TICK_PHASE = 0.5  # the monitor evaluates this share of an interval after the readings
# … or, when the readings of that instant are not all in by then, as soon as they are, but
# no later than this share: a frame that waits for its round shows figures a fraction of
# an interval old; ticking on time without them shows the previous round's, over one
# interval old (128 realistic nodes on 2 cores take ~0.6 s to read)
TICK_LATEST_PHASE = 0.9


def delay_to_boundary(
    interval_s: float, now: float, offset_s: float = 0.0, min_delay_s: float = 0.0
) -> float:
    """Seconds from `now` to the next instant k·interval + offset, at least `min_delay_s` away."""
    delay = interval_s - (now - offset_s) % interval_s
    # float `%` can return the divisor itself (e.g. -1e-300 % 1.0 == 1.0): never a 0 delay
    while delay < min_delay_s or delay <= 0:
        delay += interval_s
    return delay
