"""The running account of a session: spend integrated tick by tick from the reservation start.

The bill runs from the reservation start whether or not infertop was watching, so the
first tick charges the whole stretch since that start at the then-current rate, and the
first tick after a crash charges the gap since the last recorded tick. Idle spend and
tokens are only counted over stretches infertop watched: nobody knows how idle the
cluster was before it looked.

Tokens and finished requests come from counter increases (reset-aware, like Prometheus'
`increase()`), summed per node from one engine source, never from rate × Δt: a rate over a
sliding window would count the same tokens in several ticks. A step that no engine could
make (a rise faster than `collectors.bounds.COUNTER_MAX_PER_S`, a counter going down again
within a minute of its last reset) is not counted, and the session says so in its notes.

Figures that set spend against tokens ($/1M, $/request, the API-equivalent and spend ÷ API)
take both over one stretch, decided in one place (`stretch.choose_stretch`) and read for
every engine and the bill alike off their curves (`stretch.StretchCounts`): the whole
reservation when every engine's counters began within it, else from the moment infertop
had read every engine, to the newest moment every engine has been read to. Nothing is
billed before the reservation starts, nor after it ends unless the layout says the
hardware is billed on (`[session] billed_after_end`). Energy (GPU total-energy counters,
`energy.py`) is counted over watched stretches only; in owned mode it replaces the power
gauge's estimate in the spend.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from infertop.layouts.model import ApiPriceTable, Layout, SloConfig
from infertop.monitor.evaluation.api_price import (
    BUNDLED,
    api_cost,
    describe,
    next_flip,
    output_price_per_million,
    price_window,
)
from infertop.monitor.evaluation.counter_tally import CounterTally, FirstSight, TokenDeltas
from infertop.monitor.evaluation.energy import J_PER_KWH, EnergyTally
from infertop.monitor.evaluation.goodput import goodput
from infertop.monitor.evaluation.money import (
    break_even_ratio,
    breakeven_output_tokens_per_s,
    budget_figures,
    usd_per,
    usd_per_million,
    usd_per_million_at_rate,
)
from infertop.monitor.evaluation.phases import PHASES
from infertop.monitor.evaluation.stretch import Stretch, StretchCounts, StretchSums
from infertop.monitor.evaluation.stretch_latency import StretchLatency
from infertop.monitor.record import checks as check
from infertop.monitor.snapshot import PhaseSpend, SessionView

STATE_VERSION = 1
# SessionView fields of goodput over the stretch (`stretch_goodput`): from bucket counts the
# record does not keep, so a report takes them from the last snapshot, as the live session showed
SPAN_GOODPUT_FIELDS = (
    "span_goodput_share_low", "span_goodput_share_high", "span_goodput_note",
    "span_usd_per_million_good_tokens_low", "span_usd_per_million_good_tokens_high",
)
ZERO = Decimal(0)
CLUSTER_ROW = "(cluster)"  # spend_by_node's row for what is billed to no node (extras)
_HOUR_S = Decimal(3600)


def charge(rate_usd_per_hour: float, seconds: float) -> Decimal:
    """$/h × s, exactly. Money adds up in Decimal: summed per tick in binary floats, $200/h
    over 10,800 one-second ticks comes to $599.999999…, which is not $600 and does not
    trip the 100 % budget alert."""
    return Decimal(rate_usd_per_hour) * Decimal(seconds) / _HOUR_S

def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def reservation_end(layout: Layout, started_at: float) -> float | None:
    """The reservation end from the layout: `reservation_end`, or the start + `duration_h`."""
    session = layout.session
    if session.reservation_end is not None:
        return session.reservation_end.timestamp()
    if session.duration_h is not None:
        return started_at + session.duration_h * 3600.0
    return None


def energy_usd_per_kwh(layout: Layout) -> float | None:
    """Owned hardware pays for its energy: PUE × $/kWh. Rented: the rent covers it."""
    pricing = layout.pricing
    return pricing.pue * pricing.kwh_usd if pricing.mode == "owned" else None


def _finite(value: float | None) -> float | None:
    # a NaN or infinite figure from a broken source must not poison an exact sum forever
    return value if value is not None and math.isfinite(value) else None


@dataclass
class TickFigures:
    """What one tick tells the ledger: rates now, and counter increases since the last tick."""

    now: float
    cost_per_hour_usd: float | None
    idle_fraction: float | None = None  # of the node bill (cost-weighted over nodes)
    # Σ node $/h × node idle fraction: what idle spend integrates. Without it (a caller
    # that knows only a share) the share is taken of the whole $/h
    idle_cost_per_hour_usd: float | None = None
    extras_cost_per_hour_usd: float | None = None  # billed to no node: shown apart
    node_cost_per_hour_usd: Mapping[str, float | None] = field(default_factory=dict)
    deltas: TokenDeltas = field(default_factory=TokenDeltas)
    accepted_tokens_per_s: float | None = None
    # GPU energy counted since the last tick, per node (joules)
    energy_j_by_node: Mapping[str, float] = field(default_factory=dict)
    # owned: the measured GPU power (W) of the nodes whose energy is counted: in their $/h,
    # and replaced in the spend by the counted energy
    counted_gpu_power_w: Mapping[str, float | None] = field(default_factory=dict)


@dataclass
class SessionLedger:
    started_at: float  # unix seconds: the reservation start
    budget_usd: float | None = None
    ends_at: float | None = None  # unix seconds: the reservation end, when the layout says
    acceptable_tasks: int | None = None
    prices: ApiPriceTable = BUNDLED
    phase: str = "run"
    spend_usd: Decimal = ZERO
    idle_spend_usd: Decimal = ZERO
    output_tokens: float = 0.0
    prompt_tokens: float = 0.0
    prompt_cached_tokens: float = 0.0
    prompt_tokens_without_cache_figure: float = 0.0
    requests_finished: float = 0.0
    api_output_usd: Decimal = ZERO
    api_input_cache_hit_usd: Decimal = ZERO
    api_input_cache_miss_usd: Decimal = ZERO
    spend_by_phase: dict[str, Decimal] = field(default_factory=dict)
    seconds_by_phase: dict[str, float] = field(default_factory=dict)
    spend_by_node: dict[str, Decimal] = field(default_factory=dict)
    last_at: float | None = None
    cost_per_hour_usd: float | None = None
    idle_fraction: float | None = None
    idle_cost_per_hour_usd: float | None = None
    extras_cost_per_hour_usd: float | None = None
    accepted_tokens_per_s: float | None = None
    tokens_known: bool = False
    requests_known: bool = False
    priced: bool = False  # some stretch had a known $/h
    unwatched_s: float = 0.0  # charged stretches infertop did not see (before start, crashes)
    ticks: int = 0
    # phase changes not yet charged: (at, phase), oldest first
    pending_marks: list[tuple[float, str]] = field(default_factory=list)
    # the phase each mark switched to, with when: the record of the session's phases
    marks: list[tuple[float, str]] = field(default_factory=list)
    tally: CounterTally = field(default_factory=CounterTally)
    resumed: bool = False  # set when restored from a record: the next stretch was unwatched
    billed_after_end: bool = False  # the layout's word: the hardware is billed past the end
    spend_at_end_usd: Decimal | None = None  # the spend when the reservation ended
    # the engines' counts and the spend, over the one stretch the $/unit figures cover
    counts: StretchCounts = field(default_factory=lambda: StretchCounts(0.0))
    # the engines' TTFT / ITL bucket counts, read over the same stretch (goodput over it);
    # not kept in a record: after a resume the stretch's share is unknown, and says why
    latency: StretchLatency = field(default_factory=StretchLatency)
    energy: EnergyTally = field(default_factory=EnergyTally)
    energy_j: float = 0.0  # GPU energy over the watched stretches
    energy_known: bool = False
    energy_watched: bool = False  # some GPU's energy counter has been read
    paired_output_tokens: float = 0.0  # output tokens since then
    energy_usd_per_kwh: float | None = None  # owned: PUE × $/kWh
    energy_nodes: set[str] = field(default_factory=set)  # energy counted as of the last tick

    def __post_init__(self) -> None:
        self.counts.reservation_start = self.started_at
        self.counts.prices = self.prices

    @classmethod
    def for_layout(cls, layout: Layout, now: float) -> SessionLedger:
        """A new session's ledger: from the layout's reservation start, else from `now`."""
        start = layout.session.reservation_start
        started_at = start.timestamp() if start else now
        return cls(
            started_at=started_at,
            ends_at=reservation_end(layout, started_at),
            budget_usd=layout.session.budget_usd,
            acceptable_tasks=layout.session.acceptable_tasks,
            prices=layout.pricing.api,
            energy_usd_per_kwh=energy_usd_per_kwh(layout),
            billed_after_end=layout.session.billed_after_end,
        )

    # ------------------------------------------------------------------ phases

    def mark_phase(self, phase: str, at: float) -> None:
        """From `at` on, spend belongs to `phase`. Marks before the last tick apply now."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
        self.pending_marks.append((at, phase))
        self.pending_marks.sort()
        self.marks.append((at, phase))

    def _phase_since(self) -> float:
        """When the current phase began: its mark, or the session's start. Marks still
        pending are not in force yet (they apply at the tick that reaches them)."""
        applied = [at for at, phase in self.marks if (at, phase) not in self.pending_marks]
        return max(applied, default=self.started_at)

    def _phase_pieces(self, since: float, now: float) -> list[tuple[str, float]]:
        """Split [since, now] at pending marks: (phase, seconds) pieces, applying the marks."""
        pieces: list[tuple[str, float]] = []
        cursor = since
        while self.pending_marks and self.pending_marks[0][0] <= now:
            at, phase = self.pending_marks.pop(0)
            cut = min(max(at, cursor), now)
            if cut > cursor:
                pieces.append((self.phase, cut - cursor))
                cursor = cut
            self.phase = phase
        if now > cursor:
            pieces.append((self.phase, now - cursor))
        return pieces

    # ------------------------------------------------------------------ integration

    def advance(self, tick: TickFigures) -> None:
        """Charge the time since the previous tick (or since the start) at the current rate."""
        now = tick.now
        watched = self.last_at is not None and not self.resumed
        # billed from the reservation start (nothing before it) to its end, or on past it
        # where the layout says the hardware is still billed
        until = now if self.ends_at is None or self.billed_after_end else min(now, self.ends_at)
        since = max(self.started_at if self.last_at is None else self.last_at, self.started_at)
        since = min(since, until)
        seconds = until - since
        rate = _finite(tick.cost_per_hour_usd)
        idle = _finite(tick.idle_fraction)
        idle_rate = _finite(tick.idle_cost_per_hour_usd)
        if idle_rate is None and idle is not None and rate is not None:
            idle_rate = idle * rate
        for phase, piece_s in self._phase_pieces(since, until):
            self.seconds_by_phase[phase] = self.seconds_by_phase.get(phase, 0.0) + piece_s
            if rate is not None:
                cost = charge(rate, piece_s)
                self.spend_by_phase[phase] = self.spend_by_phase.get(phase, ZERO) + cost
        while self.pending_marks and self.pending_marks[0][0] <= now:  # marks past the bill
            self.phase = self.pending_marks.pop(0)[1]
        if rate is not None and self.ends_at is not None and since < self.ends_at <= until:
            self.spend_at_end_usd = self.spend_usd + charge(rate, self.ends_at - since)
        if rate is not None:
            cost = charge(rate, seconds)
            self.spend_usd += cost
            self.priced = True
            if watched and idle_rate is not None:
                self.idle_spend_usd += charge(idle_rate, seconds)
            node_total = ZERO
            for node, node_rate_usd in tick.node_cost_per_hour_usd.items():
                node_rate = _finite(node_rate_usd)
                if node_rate is not None:
                    node_cost = charge(node_rate, seconds)
                    node_total += node_cost
                    self.spend_by_node[node] = self.spend_by_node.get(node, ZERO) + node_cost
            # extras, amortised hardware: billed to the cluster, not to a node
            self.spend_by_node[CLUSTER_ROW] = self.spend_by_node.get(CLUSTER_ROW, ZERO) + (
                cost - node_total
            )
        if not watched:
            self.unwatched_s += seconds
        if now >= self.started_at:  # tokens before the reservation are none of its
            self._first_sights(tick.deltas.first_sights)
            self._count_tokens(since, now, tick.deltas)
        # the stretch never starts before the reservation: readings before it only tell
        # what the counters held at its start
        for sight in tick.deltas.first_sights:
            self.counts.first_sight(sight.node, sight.source,
                                    sight.seen_at if sight.as_of is None else sight.as_of,
                                    sight.born_at, sight.values)
        for reading in tick.deltas.readings:
            self.counts.reading(reading.node, reading.source, reading.as_of, reading.counted)
            count = self.counts.nodes.get(reading.node)
            if reading.latency and count is not None and count.source == reading.source:
                self.latency.reading(reading.node, count.start, reading.source, reading.as_of,
                                     reading.latency)
        # joules per output token: energy and tokens over the same stretch, from the tick
        # after the GPUs' energy was first read (NVML reads it every few ticks, so the
        # ticks that bring an energy increase are not the only ones that made tokens)
        by_node = {n: j for n, v in tick.energy_j_by_node.items() if (j := _finite(v)) is not None and j >= 0}
        if self.energy_watched:
            self.paired_output_tokens += _finite(tick.deltas.output_tokens) or 0.0
        if by_node:
            self.energy_j += sum(by_node.values())
            self.energy_known = True
        self.energy_watched = self.energy_watched or bool(self.energy.heard_at)
        if rate is not None and self.energy_usd_per_kwh is not None and watched:
            # only nodes whose counter was read before this stretch began: before its
            # first reading, a node's energy is known from its power gauge alone
            gauge_w = {n: w for n, w in tick.counted_gpu_power_w.items() if n in self.energy_nodes}
            self._owned_energy(seconds, by_node, gauge_w)
        self.energy_nodes = set(tick.counted_gpu_power_w)
        self.counts.spent(until, self.spend_usd)
        self.last_at = now
        self.resumed = False
        self.ticks += 1
        self.cost_per_hour_usd = rate
        self.idle_fraction = idle
        self.idle_cost_per_hour_usd = idle_rate
        self.extras_cost_per_hour_usd = _finite(tick.extras_cost_per_hour_usd)
        self.accepted_tokens_per_s = _finite(tick.accepted_tokens_per_s)

    def _first_sights(self, sights: list[FirstSight]) -> None:
        """The session's totals: counters that began within this reservation hold only its
        tokens, counted whole (produced evenly between their birth and this reading)."""
        for sight in sights:
            if sight.born_at is None or sight.born_at < self.started_at:
                continue
            v = sight.values
            prompt = _finite(v.get("prompt_tokens_total"))
            cached = _finite(v.get("prompt_cached_tokens_total"))
            backfill = TokenDeltas(
                output_tokens=_finite(v.get("generation_tokens_total")),
                prompt_tokens=prompt,
                prompt_cached_tokens=cached if prompt is not None else None,
                prompt_tokens_without_cache_figure=(prompt or 0.0) if cached is None else 0.0,
                requests_finished=_finite(v.get("requests_finished_total")),
            )
            self._count_tokens(min(sight.born_at, sight.seen_at), sight.seen_at, backfill)

    def _owned_energy(
        self, seconds: float, joules: Mapping[str, float], gauge_w: Mapping[str, float | None]
    ) -> None:
        """Owned hardware pays for the energy its GPUs used: where a node's energy counter
        is read, the counted joules replace the estimate from its power gauge (which the
        $/h, and so the stretch's charge, holds). The counter may be read every few ticks:
        the gauge's share is taken out every tick, the counted energy added when it comes."""
        assert self.energy_usd_per_kwh is not None
        price = self.energy_usd_per_kwh
        for node in set(joules) | set(gauge_w):
            watts = _finite(gauge_w.get(node))
            counted = Decimal(joules.get(node, 0.0) / J_PER_KWH * price)
            estimated = charge(watts / 1000.0 * price, seconds) if watts is not None else ZERO
            adjust = counted - estimated
            if not adjust:
                continue
            self.spend_usd += adjust
            self.spend_by_node[node] = self.spend_by_node.get(node, ZERO) + adjust
            self.spend_by_phase[self.phase] = self.spend_by_phase.get(self.phase, ZERO) + adjust

    def _count_tokens(self, since: float, now: float, d: TokenDeltas) -> None:
        # a NaN or infinite increase (a bug upstream) must not stick in the sums forever
        d = TokenDeltas(
            output_tokens=_finite(d.output_tokens),
            prompt_tokens=_finite(d.prompt_tokens),
            prompt_cached_tokens=_finite(d.prompt_cached_tokens),
            prompt_tokens_without_cache_figure=_finite(d.prompt_tokens_without_cache_figure) or 0.0,
            requests_finished=_finite(d.requests_finished),
        )
        if d.output_tokens is not None:
            self.output_tokens += d.output_tokens
            self.tokens_known = True
        if d.requests_finished is not None:
            self.requests_finished += d.requests_finished
            self.requests_known = True
        prompt = d.prompt_tokens or 0.0
        self.prompt_tokens += prompt
        self.prompt_cached_tokens += d.prompt_cached_tokens or 0.0
        self.prompt_tokens_without_cache_figure += d.prompt_tokens_without_cache_figure
        cost = api_cost(
            since,
            now,
            d.output_tokens or 0.0,
            prompt,
            d.prompt_cached_tokens or 0.0,
            self.prices,
        )
        self.api_output_usd += Decimal(cost.output_usd)
        self.api_input_cache_hit_usd += Decimal(cost.input_cache_hit_usd)
        self.api_input_cache_miss_usd += Decimal(cost.input_cache_miss_usd)

    # ------------------------------------------------------------------ figures

    def stretch_sums(self, now: float) -> StretchSums | None:
        """Counts and spend over the one stretch the $/unit figures cover; it ends at the
        reservation end when the bill does."""
        cap = None if self.ends_at is None or self.billed_after_end else self.ends_at
        return self.counts.sums(now, cap, self.latency.read_whole_at())

    def stretch_goodput(self, span: StretchSums | None, slo: SloConfig | None,
                        tokens: float | None, spend: float | None) -> dict[str, Any]:
        """Goodput over the stretch and the spend of that stretch per 1M good tokens
        (`stretch_latency`, `goodput`): the same tokens and spend as the session's $/1M."""
        out: dict[str, Any] = {}
        if slo is None or (slo.ttft_p99_s is None and slo.itl_p99_s is None) \
                or span is None or span.end is None:
            return out
        buckets, why = self.latency.over(Stretch(span.kind, span.start), span.end)
        good = goodput(buckets.get("ttft"), buckets.get("itl"), slo.ttft_p99_s, slo.itl_p99_s)
        if why is not None or good.share_low is None:
            return {"span_goodput_note": why or "no request of the stretch in the latency histograms"}
        return {
            "span_goodput_share_low": good.share_low,
            "span_goodput_share_high": good.share_high,
            "span_goodput_note": good.note,
            "span_usd_per_million_good_tokens_low": usd_per_million(spend, None if tokens is None
                                                                    else tokens * (good.share_high or 0.0)),
            "span_usd_per_million_good_tokens_high": usd_per_million(spend, None if tokens is None
                                                                     else tokens * good.share_low),
        }

    @property
    def api_equivalent_usd(self) -> Decimal:
        return self.api_output_usd + self.api_input_cache_hit_usd + self.api_input_cache_miss_usd

    def cache_note(self) -> str | None:
        """Says how prompt tokens were split into cache hits and misses, when it matters."""
        if self.prompt_tokens <= 0:
            return None
        if self.prompt_tokens_without_cache_figure <= 0:
            return "prompt tokens split by the engine's prefix-cache counter"
        share = self.prompt_tokens_without_cache_figure / self.prompt_tokens
        return (
            f"{share:.0%} of prompt tokens came from engines with no prefix-cache counter: "
            "billed as cache misses"
        )

    def view(self, now: float, record_path: str | None = None, slo: SloConfig | None = None) -> SessionView:
        spend = float(self.spend_usd) if self.priced else None
        # every token figure, and the spend set against it, over the one stretch
        span = self.stretch_sums(now)
        measured = span is not None and span.end is not None
        counted = span.counts if span is not None else {}
        spent = span.spend_usd if span is not None and measured else None
        span_spend = float(spent) if spent is not None and self.priced else None
        tokens = counted.get("output_tokens") if measured and self.tokens_known else None
        requests = counted.get("requests_finished") if measured and self.requests_known else None
        api = counted.get("api_usd") if measured and self.tokens_known else None
        energy_kwh = self.energy_j / J_PER_KWH if self.energy_known else None
        good = self.stretch_goodput(span if measured else None, slo, tokens, span_spend)
        budget = budget_figures(spend, self.budget_usd, self.cost_per_hour_usd, now, self.ends_at,
                                None if self.spend_at_end_usd is None else float(self.spend_at_end_usd))
        return SessionView(
            started_at=_iso(self.started_at),
            elapsed_s=max(now - self.started_at, 0.0),
            cost_per_hour_usd=self.cost_per_hour_usd,
            spend_usd=spend,
            idle_spend_usd=float(self.idle_spend_usd) if self.priced else None,
            budget_usd=self.budget_usd,
            usd_per_million_output_tokens=usd_per_million(span_spend, tokens),
            api_equivalent_usd=api,
            phase=self.phase,
            phase_elapsed_s=max(now - self._phase_since(), 0.0),
            spend_by_phase=[
                PhaseSpend(phase=p, spend_usd=float(self.spend_by_phase.get(p, ZERO)), seconds=s)
                for p, s in self.seconds_by_phase.items()
            ],
            accepted_tokens=tokens,
            requests_finished=requests,
            usd_per_request=usd_per(span_spend, requests),
            usd_per_acceptable_task=usd_per(spend, self.acceptable_tasks),
            api_break_even_ratio=break_even_ratio(span_spend, api),
            tokens_since=None if span is None else _iso(span.start),
            tokens_until=None if span is None or span.end is None else _iso(span.end),
            span_s=None if span is None or span.end is None else span.seconds,
            usd_per_million_span=None if span is None else span.kind,
            span_spend_usd=span_spend,
            reservation_starts_in_s=self.started_at - now if now < self.started_at else None,
            reservation_ended=None if self.ends_at is None else now >= self.ends_at,
            billed_after_end=self.billed_after_end if self.ends_at is not None else None,
            budget_used_fraction=budget.used_fraction,
            budget_exhausted_in_s=budget.exhausted_in_s,
            budget_alert=budget.alert,
            budget_label=budget.label,
            budget_over_by_usd=budget.over_by_usd,
            reservation_end=None if self.ends_at is None else _iso(self.ends_at),
            projected_spend_usd=budget.projected_spend_usd,
            budget_holds=budget.holds,
            breakeven_output_tokens_per_s=breakeven_output_tokens_per_s(
                self.cost_per_hour_usd, output_price_per_million(now, self.prices)
            ),
            price_window=price_window(now),
            price_window_flips_at=_iso(next_flip(now)),
            api_output_usd_per_million=output_price_per_million(now, self.prices),
            prompt_tokens=counted.get("prompt_tokens") if measured and self.tokens_known else None,
            prompt_cached_tokens=(
                counted.get("prompt_cached_tokens") if measured and self.tokens_known else None
            ),
            api_prices=describe(self.prices),
            api_cache_note=self.cache_note(),
            idle_fraction=self.idle_fraction,
            idle_cost_per_hour_usd=self.idle_cost_per_hour_usd,
            extras_cost_per_hour_usd=self.extras_cost_per_hour_usd,
            accepted_tokens_per_s=self.accepted_tokens_per_s,
            unwatched_s=self.unwatched_s,
            record_path=record_path,
            usd_per_million_output_tokens_now=usd_per_million_at_rate(
                self.cost_per_hour_usd, self.accepted_tokens_per_s
            ),
            notes=list(self.tally.doubts.values()),
            energy_kwh=energy_kwh,
            joules_per_output_token=(
                self.energy_j / self.paired_output_tokens
                if self.energy_known and self.paired_output_tokens > 0 else None
            ),
            energy_usd=(
                None if energy_kwh is None or self.energy_usd_per_kwh is None
                else energy_kwh * self.energy_usd_per_kwh
            ),
            **good,
        )

    # ------------------------------------------------------------------ persistence

    _SCALARS = (
        "started_at", "budget_usd", "ends_at", "acceptable_tasks", "phase",
        "output_tokens", "prompt_tokens", "prompt_cached_tokens",
        "prompt_tokens_without_cache_figure", "requests_finished", "last_at", "cost_per_hour_usd",
        "idle_fraction", "idle_cost_per_hour_usd", "extras_cost_per_hour_usd",
        "accepted_tokens_per_s", "tokens_known", "requests_known", "priced",
        "unwatched_s", "ticks", "energy_j", "energy_known", "energy_watched",
        "paired_output_tokens", "energy_usd_per_kwh", "billed_after_end",
    )
    # Decimal sums, stored as strings so that no digit is lost on the way through JSON
    _MONEY = (
        "spend_usd", "idle_spend_usd", "api_output_usd", "api_input_cache_hit_usd",
        "api_input_cache_miss_usd",
    )

    def to_state(self) -> dict[str, Any]:
        """Everything needed to continue this ledger after a restart (JSON-ready)."""
        state: dict[str, Any] = {"version": STATE_VERSION}
        state.update({k: getattr(self, k) for k in self._SCALARS})
        state.update({k: str(getattr(self, k)) for k in self._MONEY})
        state["spend_by_phase"] = {k: str(v) for k, v in self.spend_by_phase.items()}
        state["seconds_by_phase"] = dict(self.seconds_by_phase)
        state["spend_by_node"] = {k: str(v) for k, v in self.spend_by_node.items()}
        state["pending_marks"] = [list(m) for m in self.pending_marks]
        state["marks"] = [list(m) for m in self.marks]
        state["tally"] = self.tally.to_state()
        state["stretch"] = self.counts.to_state()
        state["spend_at_end_usd"] = None if self.spend_at_end_usd is None else str(self.spend_at_end_usd)
        return state

    # how each scalar of the state is checked when read back (started_at: see from_state)
    _SCALAR_CHECKS: ClassVar[dict[str, Callable[[object, str], object]]] = {
        "budget_usd": check.optional(check.usd),
        "ends_at": check.optional(check.time_s),
        "acceptable_tasks": check.optional(lambda v, f: check.integer(v, f, 10**15)),
        "phase": lambda v, f: check.choice(v, f, PHASES),
        "output_tokens": check.count,
        "prompt_tokens": check.count,
        "prompt_cached_tokens": check.count,
        "prompt_tokens_without_cache_figure": check.count,
        "requests_finished": check.count,
        "last_at": check.optional(check.time_s),
        "cost_per_hour_usd": check.optional(check.usd_per_hour),
        "idle_fraction": check.optional(check.fraction),
        "idle_cost_per_hour_usd": check.optional(check.usd_per_hour),
        "extras_cost_per_hour_usd": check.optional(check.usd_per_hour),
        "accepted_tokens_per_s": check.optional(check.rate_per_s),
        "tokens_known": check.flag,
        "requests_known": check.flag,
        "priced": check.flag,
        "unwatched_s": check.duration_s,
        "ticks": lambda v, f: check.integer(v, f, 10**12),
        "energy_j": check.count,
        "energy_known": check.flag,
        "energy_watched": check.flag,
        "paired_output_tokens": check.count,
        "energy_usd_per_kwh": check.optional(check.usd),
        "billed_after_end": check.flag,
    }

    @classmethod
    def from_state(cls, state: object, prices: ApiPriceTable = BUNDLED) -> SessionLedger:
        """Rebuild a ledger; raises ValueError (naming what is wrong) on a malformed state.

        The state comes from a record file, which anyone who could write it could have
        crafted: every value is checked for its type and bounds (times within the session,
        amounts finite and bounded, containers bounded) before the ledger takes it.
        """
        if not isinstance(state, Mapping):
            raise ValueError("ledger state is malformed (not a JSON object)")
        if state.get("version") != STATE_VERSION:
            version = check.shown(state.get("version"))
            raise ValueError(f"ledger state version {version} is not {STATE_VERSION}")
        try:
            return cls._checked(state, prices)
        except check.BadValue as exc:
            raise ValueError(f"ledger state is malformed ({exc})") from None

    @classmethod
    def _checked(cls, state: Mapping[str, Any], prices: ApiPriceTable) -> SessionLedger:
        def need(key: str) -> object:
            if key not in state:
                raise check.BadValue(f"{key}: missing")
            return state[key]

        start = check.time_s(need("started_at"), "started_at")
        ledger = cls(started_at=start, prices=prices)
        for key, checked in cls._SCALAR_CHECKS.items():
            if key in state:
                setattr(ledger, key, checked(state[key], key))
        if ledger.last_at is not None:
            check.near(ledger.last_at, start, "last_at")
        for key in cls._MONEY:
            setattr(ledger, key, check.amount(need(key), key))
        by_phase = check.mapping(need("spend_by_phase"), "spend_by_phase", len(PHASES))
        ledger.spend_by_phase = {
            check.choice(k, "spend_by_phase", PHASES): check.amount(v, f"spend_by_phase.{k}")
            for k, v in by_phase.items()
        }
        seconds = check.mapping(need("seconds_by_phase"), "seconds_by_phase", len(PHASES))
        ledger.seconds_by_phase = {
            check.choice(k, "seconds_by_phase", PHASES): check.duration_s(v, f"seconds_by_phase.{k}")
            for k, v in seconds.items()
        }
        by_node = check.mapping(need("spend_by_node"), "spend_by_node", check.MAX_NODES)
        ledger.spend_by_node = {
            check.text(k, "spend_by_node"): check.amount(v, f"spend_by_node.{k}")
            for k, v in by_node.items()
        }
        ledger.pending_marks = cls._checked_marks(state.get("pending_marks", []), "pending_marks", start)
        ledger.marks = cls._checked_marks(state.get("marks", []), "marks", start)
        ledger.tally.load_state(state.get("tally", []))
        # energy counters are read afresh after a restart (their gap is not counted), so the
        # tokens of the gap, which the engine counters do cover, must not be paired with them
        ledger.energy_watched = False
        if state.get("stretch") is not None:
            ledger.counts = StretchCounts.from_state(state["stretch"], start, prices)
        # else a record from before stretches: counting starts again from the next readings
        at_end = state.get("spend_at_end_usd")
        ledger.spend_at_end_usd = None if at_end is None else check.amount(at_end, "spend_at_end_usd")
        return ledger

    @staticmethod
    def _checked_marks(value: object, field: str, start: float) -> list[tuple[float, str]]:
        marks = []
        for i, mark in enumerate(check.sequence(value, field, check.MAX_MARKS)):
            where = f"{field}[{i}]"
            if not isinstance(mark, list) or len(mark) != 2:
                raise check.BadValue(f"{where}: not a [time, phase] pair")
            at = check.near(check.time_s(mark[0], where), start, where)
            marks.append((at, check.choice(mark[1], where, PHASES)))
        return marks
