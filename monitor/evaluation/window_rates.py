"""Reset-aware counter rates over a sliding window, kept from one tick to the next.

At 128 nodes each tick asks for ~3,700 rates (9 ports × rx/tx/wait, 7 engine counters,
NVLink per GPU), each over the ~11 samples of a 10 s window: re-deriving each one from
the whole window was the largest share of `Monitor.tick`. From one tick to the next a
window only slides (a sample leaves at the old end, one arrives at the new end), and in
the steady state every sample of a part carries the same counters. `WindowRates` then
keeps, per counter, the reset-aware increase of each step of the window, so a tick
costs one drop and one append per counter, and a rate is the `sum()` of those steps.

Exactly `collectors.rates.counter_rate` over the same points (the same steps, summed in
the same order; a test holds the two equal). When a counter comes and goes within the
window (unknown in some samples) the rates are derived from the window's points by
`counter_rate` itself; when the new window is not the old one slid forward (another
source took over, the ring was cleared) everything is rebuilt from the window. The
cache can make a tick cheaper, never different.

With a `trust` (per counter key, see `collectors.bounds.counter_trust`) a window holding
an unusual step of a counter (it went down, or rose faster than its limit) is handed to
`checked_counter_rate` as well, which applies every rule and says why a rate is not
trusted (`doubts`); the kept steps only ever add up ordinary rises.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence

from infertop.collectors.rates import CounterTrust, checked_counter_rate
from infertop.collectors.sample import NodeSample

# the known (not None) counters of one sample, by key; the same keys in the same order
# from one sample to the next when nothing changed on the node
Values = Mapping[Hashable, float]
Extract = Callable[[NodeSample], Values]
Trust = Callable[[Hashable], CounterTrust | None]


def _slid_by(old: list[NodeSample], new: list[NodeSample]) -> int | None:
    """k when `new` begins with `old[k:]`, else None. Samples compare by identity first
    (list `==` does), and two equal samples read the same anyway."""
    if not old or not new:
        return None
    first = new[0]
    # usually the window moved on by one sample, or not at all: look there first
    if len(old) > 1 and old[1] is first:
        k = 1
    elif old[0] is first:
        k = 0
    else:
        # by identity only: `old.index` compared every sample field by field and, not
        # finding it, wrote the sample's whole repr into its ValueError (~13 ms for a
        # realistic engine sample, 14 % of a 128-node monitor's CPU); an equal sample
        # that is not the same object is only recomputed
        found = next((i for i, sample in enumerate(old) if sample is first), None)
        if found is None:
            return None
        k = found
    kept = len(old) - k
    if kept > len(new) or old[k:] != new[:kept]:
        return None
    return k


class WindowSums:
    """Per-sample integer tallies summed over the window, kept from tick to tick (exact:
    integers). Used for the idle fraction: GPU readings below the threshold / known."""

    def __init__(self, tally: Callable[[NodeSample], tuple[int, int]]) -> None:
        self._tally = tally
        self._samples: list[NodeSample] = []
        self._tallies: deque[tuple[int, int]] = deque()
        self.totals = (0, 0)

    def update(self, window: Sequence[NodeSample]) -> WindowSums:
        window = window if isinstance(window, list) else list(window)
        k = _slid_by(self._samples, window)
        a, b = self.totals
        if k is None:
            self._samples, self._tallies, a, b = [], deque(), 0, 0
        elif k:
            del self._samples[:k]
            for _ in range(k):
                x, y = self._tallies.popleft()
                a, b = a - x, b - y
        for sample in window[len(self._samples):]:
            x, y = self._tally(sample)
            self._samples.append(sample)
            self._tallies.append((x, y))
            a, b = a + x, b + y
        self.totals = (a, b)
        return self


class WindowRates:
    """Rates of every counter that `extract` reads from a sample, over the latest window."""

    def __init__(self, extract: Extract, trust: Trust | None = None) -> None:
        self._extract = extract
        self._trust = trust
        self._samples: list[NodeSample] = []
        self._values: list[Values] = []
        # dense: every sample in the window knows exactly the counters in `_index`
        self._dense = True
        self._index: dict[Hashable, int] = {}
        # lists, not deques: a window is ~13 steps, and an empty deque is 760 bytes against
        # a list's 56 — two a counter, ~400 counters a node of 8 engines (issue 48, memory)
        self._steps: list[list[float]] = []  # per counter: increase of each step
        self._lasts: list[float] = []  # per counter: its newest value
        self._limits: list[float | None] = []  # per counter: its fastest rise per second
        # per counter: the steps that were not an ordinary rise within the limit, by the
        # sequence number of the sample that ends them (see `_seq`)
        self._unusual: list[list[int]] = []
        self._seq = 0  # sequence number of `_samples[0]`
        #: why a rate asked for since the last `update` is not trusted, by key
        self.doubts: dict[Hashable, str] = {}
        #: a rate over readings spanning less than this is not yet a rate: still settling
        #: (the first frames' few readings put every jitter in the clock into the figure)
        self.min_span_s = 0.0

    def update(self, window: Sequence[NodeSample]) -> WindowRates:
        """Make the rates those over `window` (samples of one source, oldest first)."""
        window = window if isinstance(window, list) else list(window)
        self.doubts = {}
        k = _slid_by(self._samples, window)
        if k is None:
            self._samples, self._values = [], []
            self._dense, self._index, self._steps, self._lasts = True, {}, [], []
            self._limits, self._unusual = [], []
        elif k:
            del self._samples[:k]
            del self._values[:k]
            self._seq += k
            if self._dense:
                for steps in self._steps:
                    del steps[:k]
                for unusual in self._unusual:
                    if unusual and unusual[0] <= self._seq:
                        del unusual[:bisect.bisect_right(unusual, self._seq)]
        for sample in window[len(self._samples):]:
            self._append(sample)
        if not self._dense and self._values:
            keys = self._values[-1].keys()
            if all(v.keys() == keys for v in self._values):
                self._make_dense()  # the odd sample left the window
        return self

    def _append(self, sample: NodeSample) -> None:
        values = self._extract(sample)
        self._samples.append(sample)
        self._values.append(values)
        if not self._dense:
            return
        if len(self._values) == 1:
            self._make_dense()
        elif values.keys() == self._index.keys():
            self._add_steps(len(self._samples) - 1, values)
        else:
            self._dense = False

    def _add_steps(self, at: int, values: Values) -> None:
        """The steps from the sample before `_samples[at]` to it."""
        dt = self._samples[at].taken_at - self._samples[at - 1].taken_at
        index, steps, lasts, limits = self._index, self._steps, self._lasts, self._limits
        for key, value in values.items():
            i = index[key]
            prev = lasts[i]
            limit = limits[i]
            if value >= prev:
                steps[i].append(value - prev)
                if limit is not None and value - prev > limit * dt:
                    self._unusual[i].append(self._seq + at)
            else:
                steps[i].append(value)
                if limit is not None:  # a reset: `checked_counter_rate` judges it
                    self._unusual[i].append(self._seq + at)
            lasts[i] = value

    def _make_dense(self) -> None:
        first = self._values[0]
        self._index = {key: i for i, key in enumerate(first)}
        self._steps = [[] for _ in first]
        self._lasts = list(first.values())
        trusts = [self._trust(key) if self._trust else None for key in first]
        self._limits = [t.max_per_s if t is not None else None for t in trusts]
        self._unusual = [[] for _ in first]
        self._dense = True
        for at in range(1, len(self._values)):
            self._add_steps(at, self._values[at])

    def _checked(self, key: Hashable) -> float | None:
        points = [(s.taken_at, v.get(key)) for s, v in zip(self._samples, self._values, strict=True)]
        rate, doubt = checked_counter_rate(points, self._trust(key) if self._trust else None)
        if doubt is not None:
            self.doubts[key] = doubt
        return rate

    def rate(self, key: Hashable) -> float | None:
        """Per-second rate of one counter over the window; None when unknown or, with a
        `trust`, not trusted (`doubts` then says why)."""
        samples = self._samples
        if len(samples) >= 2 and samples[-1].taken_at - samples[0].taken_at < self.min_span_s:
            return None  # settling: shown "—" until the readings span one interval
        if not self._dense:
            return self._checked(key)
        i = self._index.get(key)
        if i is None or len(samples) < 2:
            return None  # unknown in every sample, or a single reading
        if self._unusual[i]:
            return self._checked(key)
        dt = samples[-1].taken_at - samples[0].taken_at
        return sum(self._steps[i]) / dt if dt > 0 else None


class RateCache:
    """One `WindowRates` per (node, part): what `Monitor` keeps between ticks."""

    def __init__(self) -> None:
        self._by_part: dict[tuple[str, str], WindowRates] = {}
        self._sums: dict[tuple[str, Hashable], WindowSums] = {}

    def rates(
        self, node: str, part: str, extract: Extract, window: Sequence[NodeSample],
        trust: Trust | None = None, min_span_s: float = 0.0,
    ) -> WindowRates:
        """`min_span_s`: the span of readings a rate needs (the layout's interval)."""
        key = (node, part)
        cached = self._by_part.get(key)
        if cached is None or cached._extract is not extract or cached._trust is not trust:
            cached = self._by_part[key] = WindowRates(extract, trust)
        cached.min_span_s = min_span_s
        return cached.update(window)

    def sums(
        self, node: str, what: Hashable, tally: Callable[[NodeSample], tuple[int, int]],
        window: Sequence[NodeSample],
    ) -> WindowSums:
        """`what` names the tally (with its parameters, e.g. a threshold): one per node."""
        key = (node, what)
        cached = self._sums.get(key)
        if cached is None:
            cached = self._sums[key] = WindowSums(tally)
        return cached.update(window)

    def forget_except(self, nodes: set[str]) -> None:
        """Drop the windows of nodes no longer evaluated (their samples go with them)."""
        for key in [k for k in self._by_part if k[0] not in nodes]:
            del self._by_part[key]
        for key2 in [k for k in self._sums if k[0] not in nodes]:
            del self._sums[key2]
