"""The one stretch of time the session's $/unit figures cover, and the counts over it.

$/1M output tokens, $/request, the API-equivalent and spend ÷ API set tokens against
spend. Both must cover one stretch, [start, end], for every node at once, whatever its
source (a page scraped every second, a log whose counters move every ten, a Prometheus
that answers fifteen seconds behind) and through restarts, late starts and nodes that
join or leave (issue 45: a log-read node seen first turned the stretch to "watched" and
the counters of the nodes seen after it were then counted whole, two hours of tokens over
seconds of spend).

* **start** is decided in one place, `choose_stretch`: the reservation start when every
  engine's counters began within the reservation (what they hold is all of its tokens),
  else the moment infertop had read every engine once (before it, some engine's tokens are
  of no known stretch). Never before the reservation start; none before it begins.
* **end** is the newest moment every engine has been read to (`stretch_end`): the oldest
  of the engines' latest readings, as of the time their counters describe (a log's
  newest throughput line, a backend's sample stamp). An engine silent for long no longer
  holds it back; what it counted stays counted.
* each engine's counted increase (reset-aware, `counter_tally`) is a cumulative curve of
  its readings; its value at `start` and `end` is read off that curve between the two
  readings around it (exact for a steady rate); the spend likewise off the ledger's
  tick-by-tick spend. A stretch is thus the same seconds for every engine and the bill.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from infertop.layouts.model import ApiPriceTable
from infertop.monitor.evaluation.api_price import BUNDLED, api_cost, next_flip
from infertop.monitor.record import checks as check

# what a stretch counts, in this order (a Vector)
QUANTITIES = (
    "output_tokens", "prompt_tokens", "prompt_cached_tokens",
    "prompt_tokens_without_cache_figure", "requests_finished", "api_usd",
)
Vector = tuple[float, ...]
ZEROS: Vector = (0.0,) * len(QUANTITIES)
# an engine not read for this long (or three of its own gaps, if longer: a log prints a
# line every ten seconds) holds the stretch's end back no more: it left, or stopped
HOLD_MIN_S = 60.0
HOLD_GAPS = 3.0
# readings kept behind the stretch's end, to read values between them (an engine that
# joins behind the end, a backend answering late, needs the others' values there)
KEEP_S = 120.0
PRUNE_EVERY = 32  # ticks between prunings (each drops what the last 32 ticks left behind)
MAX_POINTS = 4096  # per engine: a bound, whatever the cadence

_COUNTER = {
    "generation_tokens_total": 0, "prompt_tokens_total": 1,
    "prompt_cached_tokens_total": 2, "requests_finished_total": 4,
}


@dataclass(frozen=True)
class NodeStart:
    """When an engine's counting began: its first reading (as of the time it describes),
    and whether its counters began within the reservation (`whole`: counted whole from
    `born_at`, their birth)."""

    first_at: float
    whole: bool = False
    born_at: float | None = None


@dataclass(frozen=True)
class Stretch:
    kind: str  # "reservation" | "watched"
    start: float  # unix s


def choose_stretch(reservation_start: float, now: float, nodes: Sequence[NodeStart]) -> Stretch | None:
    """The one stretch every $/unit figure covers (None: nothing to cover yet).

    - before the reservation starts, or with no engine read: none;
    - every engine's counters began within the reservation: the whole reservation (their
      counts there are 0, what they held at first sight is its tokens);
    - else from the latest first reading of an engine whose counters began before the
      reservation (or do not say when): before it, that engine's tokens are unknown;
    - an engine counted whole but first read after that moment, whose counters began
      before it, would need its count at that moment guessed (spread evenly between its
      birth and first reading): the stretch starts at its first reading instead;
    - never before the reservation start: a stretch that starts there is the reservation.
    """
    if now < reservation_start or not nodes:
        return None
    start = max([n.first_at for n in nodes if not n.whole], default=reservation_start)
    start = max(start, reservation_start)
    moved = start > reservation_start
    while moved:
        moved = False
        for n in nodes:
            born = n.born_at if n.born_at is not None else -math.inf
            if n.whole and born < start < n.first_at:
                start, moved = n.first_at, True
    return Stretch("reservation" if start <= reservation_start else "watched", start)


def holds_end(latest_at: float, gap_s: float | None, now: float) -> bool:
    """Whether an engine read to `latest_at` still holds the stretch's end back."""
    return now - latest_at <= max(HOLD_MIN_S, HOLD_GAPS * (gap_s or 0.0))


def stretch_end(latest: Sequence[tuple[float, float | None]], now: float, cap: float | None) -> float | None:
    """The newest moment every engine still answering has been read to: the oldest of
    their latest readings ((as-of time, gap between its last two readings) per engine),
    not after `now` nor `cap` (the reservation end, when it is not billed after it).
    None when no engine holds it (all left: the end is the last anyone was read to)."""
    holding = [at for at, gap in latest if holds_end(at, gap, now)]
    end = min(holding) if holding else max((at for at, _ in latest), default=None)
    if end is None:
        return None
    end = min(end, now)
    return end if cap is None else min(end, cap)


def _lerp(t: float, a: tuple[float, Vector], b: tuple[float, Vector]) -> Vector:
    (t0, v0), (t1, v1) = a, b
    if t1 <= t0:
        return v1
    w = (t - t0) / (t1 - t0)
    return tuple(x + (y - x) * w for x, y in zip(v0, v1, strict=True))


@dataclass
class NodeCount:
    """One engine's counted increases as a cumulative curve over its readings."""

    source: str
    start: NodeStart
    points: list[tuple[float, Vector]] = field(default_factory=list)  # (as of, cumulative)
    times: list[float] = field(default_factory=list)  # the points' times, for bisect
    last_values: dict[str, float] = field(default_factory=dict)  # the tally's counted sums
    gap_s: float | None = None

    @property
    def latest_at(self) -> float:
        return self.points[-1][0]

    def at(self, t: float) -> Vector | None:
        """The cumulative count at `t`: between the readings around it; flat after the
        last (nothing more is known to be counted); 0 before its counters began; None
        where the readings that would tell were dropped."""
        pts = self.points
        if t >= pts[-1][0]:
            return pts[-1][1]
        i = bisect.bisect_right(self.times, t)
        if i > 0:
            return _lerp(t, pts[i - 1], pts[i])
        born = self.start.born_at
        if not self.start.whole or born is None:
            return None
        zeros = (0.0,) * len(pts[0][1])  # a vector of QUANTITIES, or of a histogram's buckets
        if t <= born:
            return zeros  # what they hold began after `t`
        # what they held at first sight, taken as made evenly since their birth
        return _lerp(t, (born, zeros), pts[0]) if pts[0][0] == self.start.first_at else None

    def add(self, as_of: float, vector: Vector) -> None:
        pts = self.points
        if pts and as_of <= pts[-1][0]:
            # the same line again (a log read twice), or a reading out of order: the
            # newest counts stand at the newest time
            pts[-1] = (pts[-1][0], vector)
            return
        if pts:
            self.gap_s = as_of - pts[-1][0]
        pts.append((as_of, vector))
        self.times.append(as_of)
        if len(pts) > MAX_POINTS:
            del pts[: len(pts) - MAX_POINTS], self.times[: len(self.times) - MAX_POINTS]

    def prune(self, before: float) -> None:
        """Drop readings no value after `before` needs (one at or before it stays)."""
        i = bisect.bisect_right(self.times, before) - 1
        if i > 0:
            del self.points[:i], self.times[:i]


@dataclass(frozen=True)
class StretchSums:
    """What the session's $/unit figures are made of: one stretch, counts and spend over it."""

    kind: str
    start: float
    end: float | None  # None: the stretch has no length yet
    spend_usd: Decimal | None
    counts: Mapping[str, float]

    @property
    def seconds(self) -> float:
        return 0.0 if self.end is None else max(self.end - self.start, 0.0)


@dataclass
class StretchCounts:
    """The engines' counts and the ledger's spend, kept so that both can be read over the
    stretch `choose_stretch` decides."""

    reservation_start: float
    prices: ApiPriceTable = BUNDLED
    nodes: dict[str, NodeCount] = field(default_factory=dict)
    spend: list[tuple[float, Decimal]] = field(default_factory=list)  # (tick, cumulative)
    # values at the stretch's start, read once it is known (the readings then go)
    based_on: Stretch | None = None
    bases: dict[str, Vector] = field(default_factory=dict)
    spend_base: Decimal | None = None
    # the API's per-token prices over [from, to) of one price window: (from, to, prices)
    _unit_prices: tuple[float, float, tuple[float, float, float]] | None = None
    _since_prune: int = 0

    # ------------------------------------------------------------------ intake

    def first_sight(self, node: str, source: str, as_of: float, born_at: float | None,
                    values: Mapping[str, float]) -> None:
        """An engine read for the first time: counted whole from its counters' birth when
        it began within the reservation (what it holds, spread over birth → now for the
        API's price windows), else from this reading."""
        whole = born_at is not None and born_at >= self.reservation_start
        vector = ZEROS
        if whole:
            assert born_at is not None
            cached = "prompt_cached_tokens_total" in values
            vector = self._step(ZEROS, {}, dict(values), born_at, as_of, cached)
        count = NodeCount(source, NodeStart(as_of, whole, born_at if whole else None))
        count.add(as_of, vector)
        self.nodes[node] = count

    def reading(self, node: str, source: str, as_of: float, counted: Mapping[str, float]) -> None:
        """A reading: `counted` is the tally's reset-aware increases of this (node,
        source) since it was first read. Only the engine's first source counts."""
        count = self.nodes.get(node)
        if count is None:  # read before any first sight (a resumed record's engines)
            self.first_sight(node, source, as_of, None, {})
            count = self.nodes[node]
            count.last_values = dict(counted)
            return
        if count.source != source:
            return
        cached = "prompt_cached_tokens_total" in counted
        last_at = count.points[-1][0]
        vector = self._step(count.points[-1][1], count.last_values, counted, last_at, as_of, cached)
        count.last_values = dict(counted)
        count.add(as_of, vector)

    def _step(self, vector: Vector, before: Mapping[str, float], after: Mapping[str, float],
              t0: float, t1: float, cached: bool) -> Vector:
        out = list(vector)
        delta = [0.0] * len(QUANTITIES)
        for name, i in _COUNTER.items():
            d = after.get(name, 0.0) - before.get(name, 0.0)
            delta[i] = d if math.isfinite(d) and d > 0 else 0.0
        if not cached:
            delta[2] = 0.0
            delta[3] = delta[1]
        out_usd, hit_usd, miss_usd = self._per_token(min(t0, t1), t1)
        hit = min(delta[2], delta[1]) if cached else 0.0
        delta[5] = delta[0] * out_usd + hit * hit_usd + (delta[1] - hit) * miss_usd
        for i, d in enumerate(delta):
            out[i] += d
        return tuple(out)

    def _per_token(self, t0: float, t1: float) -> tuple[float, float, float]:
        """The API's $ per output, cache-hit and cache-miss token for tokens made evenly
        over [t0, t1] (`api_cost`'s blend), kept while the stretches stay in one window:
        readings come every second, the window flips a few times a day."""
        cached = self._unit_prices
        if cached is not None and cached[0] <= t0 and t1 < cached[1]:
            return cached[2]
        unit = api_cost(t0, t1, 1.0, 1.0, 1.0, self.prices)
        miss = api_cost(t0, t1, 0.0, 1.0, None, self.prices)
        prices = (unit.output_usd, unit.input_cache_hit_usd, miss.input_cache_miss_usd)
        flip = next_flip(t0)
        if t1 < flip:  # within one window: the same prices until it flips
            self._unit_prices = (t0, flip, prices)
        return prices

    def spent(self, at: float, spend_usd: Decimal) -> None:
        """The ledger's cumulative spend after a tick at `at`."""
        if not self.spend:
            self.spend.append((self.reservation_start, Decimal(0)))
        if at <= self.spend[-1][0]:
            self.spend[-1] = (self.spend[-1][0], spend_usd)
        else:
            self.spend.append((at, spend_usd))

    def _spend_at(self, t: float) -> Decimal | None:
        pts = self.spend
        if not pts or t > pts[-1][0]:
            return None
        i = bisect.bisect_right(pts, t, key=lambda p: p[0])
        if i == 0:
            return None if t < self.reservation_start else Decimal(0)
        if i == len(pts):
            return pts[-1][1]
        (t0, s0), (t1, s1) = pts[i - 1], pts[i]
        return s0 + (s1 - s0) * Decimal((t - t0) / (t1 - t0))

    # ------------------------------------------------------------------ figures

    def sums(self, now: float, cap: float | None = None,
             read_whole_at: Mapping[str, float] | None = None) -> StretchSums | None:
        """`read_whole_at`: per engine, when every part the session's figures read of it had
        been read once (its latency buckets may come a round or two after its counters,
        `stretch_latency`): the stretch starts no earlier for an engine not counted whole."""
        later = read_whole_at or {}
        stretch = choose_stretch(self.reservation_start, now, [
            replace(n.start, first_at=max(n.start.first_at, later.get(name, n.start.first_at)))
            for name, n in self.nodes.items()
        ])
        if stretch is None:
            return None
        if stretch != self.based_on:
            self.based_on, self.bases, self.spend_base = stretch, {}, None
        for name, count in self.nodes.items():
            if name not in self.bases and (base := count.at(stretch.start)) is not None \
                    and count.latest_at >= stretch.start:
                self.bases[name] = base
        if self.spend_base is None:
            self.spend_base = self._spend_at(stretch.start)
        end = stretch_end([(n.latest_at, n.gap_s) for n in self.nodes.values()], now, cap)
        self._prune(stretch, end)
        if end is None or end <= stretch.start or self.spend_base is None:
            return StretchSums(stretch.kind, stretch.start, None, None, {})
        total = [0.0] * len(QUANTITIES)
        for name, count in self.nodes.items():
            base = self.bases.get(name)
            if base is None:
                base = count.at(stretch.start)
            value = count.at(end)
            if base is None or value is None:
                # its readings there are gone: unknown, not a sum without it
                return StretchSums(stretch.kind, stretch.start, None, None, {})
            for i, (a, b) in enumerate(zip(base, value, strict=True)):
                total[i] += b - a
        spend_end = self._spend_at(end)
        spend = None if spend_end is None else spend_end - self.spend_base
        return StretchSums(stretch.kind, stretch.start, end, spend, dict(zip(QUANTITIES, total, strict=True)))

    def _prune(self, stretch: Stretch, end: float | None) -> None:
        self._since_prune += 1
        if self._since_prune < PRUNE_EVERY:
            return
        self._since_prune = 0
        keep_from = (end if end is not None else stretch.start) - KEEP_S
        if len(self.bases) < len(self.nodes):
            keep_from = min(keep_from, stretch.start)
        for count in self.nodes.values():
            count.prune(keep_from)
        if self.spend_base is not None:
            i = bisect.bisect_right(self.spend, keep_from, key=lambda p: p[0]) - 1
            if i > 0:
                del self.spend[:i]

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """The counts to go on after a restart: each engine's last two readings, the
        values at the stretch's start once read, the last spend points."""
        return {
            "nodes": [
                {"node": name, "source": c.source, "first_at": c.start.first_at, "whole": c.start.whole,
                 "born_at": c.start.born_at, "gap_s": c.gap_s, "last_values": c.last_values,
                 "points": [[t, list(v)] for t, v in c.points[-2:]]}
                for name, c in self.nodes.items()
            ],
            "spend": [[t, str(s)] for t, s in self.spend[-2:]],
            "based_on": None if self.based_on is None else [self.based_on.kind, self.based_on.start],
            "bases": {k: list(v) for k, v in self.bases.items()},
            "spend_base": None if self.spend_base is None else str(self.spend_base),
        }

    @classmethod
    def from_state(cls, value: object, reservation_start: float, prices: ApiPriceTable) -> StretchCounts:
        """Raises check.BadValue on a malformed state (a record is anyone's file)."""
        row = check.mapping(value, "stretch", 5)
        out = cls(reservation_start, prices)
        for i, item in enumerate(check.sequence(row.get("nodes", []), "stretch.nodes", check.MAX_NODES)):
            where = f"stretch.nodes[{i}]"
            item = check.mapping(item, where, 8)
            name = check.text(item.get("node"), f"{where}.node")
            born = check.optional(check.time_s)(item.get("born_at"), f"{where}.born_at")
            start = NodeStart(check.time_s(item.get("first_at"), f"{where}.first_at"),
                              check.flag(item.get("whole"), f"{where}.whole"), born)
            count = NodeCount(check.text(item.get("source"), f"{where}.source"), start)
            count.gap_s = check.optional(check.duration_s)(item.get("gap_s"), f"{where}.gap_s")
            last = check.mapping(item.get("last_values", {}), f"{where}.last_values", len(_COUNTER))
            count.last_values = {
                check.choice(k, f"{where}.last_values", _COUNTER): check.count(v, f"{where}.{k}")
                for k, v in last.items()
            }
            for point in check.sequence(item.get("points"), f"{where}.points", 2):
                count.points.append(_point(point, f"{where}.points"))
                count.times.append(count.points[-1][0])
            if not count.points:
                raise check.BadValue(f"{where}.points: empty")
            out.nodes[name] = count
        for point in check.sequence(row.get("spend", []), "stretch.spend", 2):
            if not isinstance(point, list) or len(point) != 2:
                raise check.BadValue("stretch.spend: not a [time, amount] pair")
            at, amount = check.time_s(point[0], "stretch.spend"), check.amount(point[1], "stretch.spend")
            out.spend.append((at, amount))
        based = row.get("based_on")
        if based is not None:
            if not isinstance(based, list) or len(based) != 2:
                raise check.BadValue("stretch.based_on: not a [kind, start] pair")
            out.based_on = Stretch(check.choice(based[0], "stretch.based_on", ("reservation", "watched")),
                                   check.time_s(based[1], "stretch.based_on"))
            bases = check.mapping(row.get("bases", {}), "stretch.bases", check.MAX_NODES)
            out.bases = {
                check.text(k, "stretch.bases"): _vector(v, f"stretch.bases.{k}") for k, v in bases.items()
            }
            base = row.get("spend_base")
            out.spend_base = None if base is None else check.amount(base, "stretch.spend_base")
        return out


def _vector(value: object, where: str) -> Vector:
    items = check.sequence(value, where, len(QUANTITIES))
    if len(items) != len(QUANTITIES):
        raise check.BadValue(f"{where}: not {len(QUANTITIES)} counts")
    return tuple(check.count(v, where) for v in items)


def _point(value: object, where: str) -> tuple[float, Vector]:
    if not isinstance(value, list) or len(value) != 2:
        raise check.BadValue(f"{where}: not a [time, counts] pair")
    return check.time_s(value[0], where), _vector(value[1], where)
