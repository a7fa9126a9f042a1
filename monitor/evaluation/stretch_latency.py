"""The latency histograms over the session's one stretch: goodput over the billing stretch.

The session's $/1M good tokens divides the spend of the stretch `stretch.choose_stretch`
decides by the good share of the tokens of that same stretch; the share comes from the
TTFT and ITL histograms' bucket counts read at the stretch's two edges, exactly as the
ledger reads tokens and spend there (`stretch.StretchCounts`):

* each engine's bucket counts are counted like its token counters: increases between its
  readings, a fall of the total a restart (its new counts counted from zero), a bucket
  falling while the total rose not counted; the counted sums are a cumulative curve over
  its readings, read between the two readings around an edge;
* an engine counted whole (counters born within the reservation) counts what its buckets
  held at their first reading whole, as its tokens;
* a scrape reads the buckets on some rounds only, so they are first read a round or two
  after the counters: the stretch starts once both are read (`read_whole_at`), where that
  came within `FIRST_READ_GRACE_S` of the engine's first reading. Buckets first read later
  (a histogram that appeared late, infertop restarted from its record) would need the
  counts at the stretch's start guessed: the stretch's share is unknown, and says why;
* an engine whose bucket set changed (restarted with other bounds) is unknown over a
  stretch across the change; nodes are summed by bound (`latency.merge`), as a pool is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from infertop.monitor.evaluation.latency import Buckets, merge
from infertop.monitor.evaluation.stretch import HOLD_MIN_S, KEEP_S, NodeCount, NodeStart, Stretch, Vector

# buckets first read this long after the engine's counters still start its counting with
# them (a scrape reads them every few rounds); later, the stretch's start is not waited for
FIRST_READ_GRACE_S = HOLD_MIN_S


@dataclass
class BucketCurve:
    """One engine's counted bucket increases of one histogram, cumulative over its readings."""

    bounds: tuple[float, ...]
    count: NodeCount
    last: tuple[float, ...]  # the counts as last read
    counters_first_at: float  # the engine's counters' first reading
    broken: bool = False  # its bucket set changed: unknown over a stretch across the change


@dataclass
class StretchLatency:
    """Every engine's TTFT and ITL bucket counts, kept to be read over the stretch."""

    curves: dict[str, dict[str, BucketCurve]] = field(default_factory=dict)  # node → name → curve
    based_on: Stretch | None = None
    bases: dict[tuple[str, str], Vector] = field(default_factory=dict)  # read at the stretch's start

    def reading(self, node: str, counters: NodeStart, source: str, as_of: float,
                latency: Mapping[str, Buckets] | None) -> None:
        """A reading of the engine's histograms (`counters`: when its counters were first
        read, and whether they count whole)."""
        for name, buckets in (latency or {}).items():
            bounds = tuple(le for le, _ in buckets)
            values = tuple(c for _, c in buckets)
            curves = self.curves.setdefault(node, {})
            curve = curves.get(name)
            if curve is None:
                whole = counters.whole and as_of - counters.first_at <= FIRST_READ_GRACE_S
                start = NodeStart(as_of, whole, counters.born_at if whole else None)
                count = NodeCount(source, start)
                count.add(as_of, values if whole else (0.0,) * len(values))
                curves[name] = BucketCurve(bounds, count, values, counters.first_at)
                continue
            if bounds != curve.bounds:
                curve.broken, curve.bounds, curve.last = True, bounds, values
                continue
            cumulative = curve.count.points[-1][1]
            if values[-1] < curve.last[-1]:
                step = values  # the total fell: a restart, counted from zero
            else:
                step = tuple(v - p for v, p in zip(values, curve.last, strict=True))
            curve.last = values
            if any(d < 0 for d in step):
                step = (0.0,) * len(values)  # a bucket fell while the total rose: not counted
            curve.count.add(as_of, tuple(c + d for c, d in zip(cumulative, step, strict=True)))

    def read_whole_at(self) -> dict[str, float]:
        """Per engine, when its histograms were first read, where that came within the grace
        of its counters' first reading (`stretch.StretchCounts.sums`)."""
        out: dict[str, float] = {}
        for node, curves in self.curves.items():
            firsts = [c.count.start.first_at for c in curves.values()
                      if c.count.start.first_at - c.counters_first_at <= FIRST_READ_GRACE_S]
            if firsts:
                out[node] = max(firsts)
        return out

    def over(self, stretch: Stretch, end: float) -> tuple[dict[str, Buckets], str | None]:
        """Each histogram's increase over [stretch.start, end], summed over the engines by
        bound; ({}, why) where some engine's counts at an edge are not known."""
        if stretch != self.based_on:
            self.based_on, self.bases = stretch, {}
        per_name: dict[str, list[Buckets]] = {}
        for node, curves in self.curves.items():
            for name, curve in curves.items():
                key = (node, name)
                if key not in self.bases and curve.count.latest_at >= stretch.start \
                        and (base := curve.count.at(stretch.start)) is not None:
                    self.bases[key] = base
                if curve.broken:
                    return {}, f"{node}'s {name.upper()} buckets changed bounds within the stretch"
                base = self.bases.get(key)
                value = curve.count.at(end)
                if base is None or value is None:
                    return {}, (f"{node}'s {name.upper()} buckets were first read after the stretch began: "
                                "their counts at its start are not known")
                per_name.setdefault(name, []).append(tuple(
                    (le, b - a) for le, a, b in zip(curve.bounds, base, value, strict=True)))
                curve.count.prune(end - KEEP_S)
        out = {name: merged for name, hs in per_name.items() if (merged := merge(hs)) is not None}
        return out, None
