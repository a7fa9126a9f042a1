"""Latency percentiles from histogram buckets over a window. Pure.

An engine exposes each latency as cumulative `le` buckets. Over a window the requests
it saw are the buckets' increase from the window's first sample to its last (a count
that went down is a restart: the increase of that step is the new count, as with any
counter). A percentile is found the way Prometheus' `histogram_quantile` does: the
bucket holding the rank, and a straight line between its bounds — so the true value is
only known to lie within that bucket, and the bounds travel with the figure for a
viewer to say "25–50 ms". A rank in the +Inf bucket is the highest finite bound, with
no upper bound.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

Buckets = tuple[tuple[float, float], ...]  # (le, cumulative count), +inf last
# a node's window: each latency it publishes ("ttft", …, "kv_transfer") → its bucket
# increases over the window. The evaluation's working data (the pools' and the P→D path's
# percentiles are made of the nodes' windows summed), carried beside the node's view,
# never on it: the snapshot is the picture, not the data it was made of
LatencyWindow = dict[str, Buckets]

LATENCIES = ("ttft", "itl", "e2e", "queue")
PERCENTILES = (("p50", 0.50), ("p99", 0.99))
_LE = itemgetter(0)
_COUNT = itemgetter(1)


@dataclass(frozen=True)
class Percentile:
    value_s: float
    lower_s: float  # the bucket the rank fell in
    upper_s: float | None  # None: past the highest finite bound (the +Inf bucket)


def window_increase(series: Sequence[Buckets | None]) -> Buckets | None:
    """The requests seen over a window of cumulative readings (oldest first), as
    cumulative buckets; None with fewer than two readings of the latest bucket set.

    Unknown readings (None) are passed over: the scrape source reads an engine's buckets
    on some rounds only (`collectors.sources.scrape.latency_every_rounds`), and a cumulative count
    read before and after a gap still says what came in between. Readings of another
    bucket set (an engine restarted with other buckets) end the run: only the newest run
    of the same bounds counts."""
    known = [r for r in series if r is not None]
    if not known:
        return None
    last = known[-1]
    size = len(last)
    start = len(known) - 1
    while start > 0 and len(known[start - 1]) == size:
        start -= 1
    run = known[start:]
    if len(run) < 2:
        return None
    # a tick holds ~10 readings per histogram and node: compare bounds of the run's ends
    # only, and look reading by reading only when they differ (an engine restarted with
    # other buckets of the same number within the window)
    bounds = list(map(_LE, last))
    if list(map(_LE, run[0])) != bounds:
        k = len(run) - 1
        while k > 0 and list(map(_LE, run[k - 1])) == bounds:
            k -= 1
        run = run[k:]
        if len(run) < 2:
            return None
    first = run[0]
    totals = [r[-1][1] for r in run]
    if all(map(operator.le, totals, itertools.islice(totals, 1, None))):
        # ~5,000 histograms a tick at 128 nodes of 8 engines: each bucket's increase by
        # map over the counts (no Python frame a bucket)
        counts = list(map(operator.sub, map(_COUNT, last), map(_COUNT, first)))
        if min(counts) < 0:
            return None  # a bucket fell while the total rose: not a histogram to trust
        return tuple(zip(bounds, counts, strict=True))
    # a restart within the window: add up each step, a fall counting from zero
    counts = [0.0] * len(last)
    for prev, cur in itertools.pairwise(run):
        reset = cur[-1][1] < prev[-1][1]
        for i, ((_, c), (_, p)) in enumerate(zip(cur, prev, strict=True)):
            counts[i] += c if reset else c - p
    if any(c < 0 for c in counts):
        return None
    return tuple((le, c) for (le, _), c in zip(last, counts, strict=True))


def merge(histograms: Iterable[Buckets | None]) -> Buckets | None:
    """Buckets of several nodes summed by bound; those whose bounds differ from the first
    known one's are left out (a pool mixing engines with other bucket sets)."""
    out: list[list[float]] | None = None
    bounds: list[float] = []
    for h in histograms:
        if h is None:
            continue
        if out is None:
            out = [[le, c] for le, c in h]
            bounds = [le for le, _ in h]
        elif [le for le, _ in h] == bounds:
            for row, (_, c) in zip(out, h, strict=True):
                row[1] += c
    return None if out is None else tuple((le, c) for le, c in out)


def percentile(buckets: Buckets | None, q: float) -> Percentile | None:
    """The q-quantile (0 < q ≤ 1), interpolated within its bucket; None with no requests."""
    if not buckets or not 0 < q <= 1:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank and c > prev_c:
            if math.isinf(le):
                return Percentile(prev_le, prev_le, None)
            lower = prev_le if prev_le < le else le
            return Percentile(lower + (le - lower) * (rank - prev_c) / (c - prev_c), lower, le)
        prev_le, prev_c = le, c
    return None


def count(buckets: Buckets | None) -> float | None:
    """How many observations the buckets hold."""
    return None if not buckets else buckets[-1][1]

