"""Reset-aware increases of the engine counters the ledger integrates, as samples arrive.

Tokens and finished requests come from counter increases (like Prometheus' `increase()`),
per (node, source), one source per node; a step no engine could make is not counted and
left as a doubt the session shows (`collectors.bounds`, `collectors.rates.step_doubt`).
A node's first reading is a `FirstSight`: what its counters held, and when they began.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infertop.collectors.bounds import counter_trust
from infertop.collectors.rates import step_doubt
from infertop.collectors.sample import NodeSample
from infertop.monitor.format import fmt_si
from infertop.monitor.record import checks as check

MAX_TALLY_NOTES = 8  # distinct (node, counter) notes kept on the session


# engine counters the ledger integrates, by canonical EngineSample field
TALLIED = (
    "generation_tokens_total",
    "prompt_tokens_total",
    "prompt_cached_tokens_total",
    "requests_finished_total",
)


@dataclass
class TokenDeltas:
    """Counter increases since the previous tick, summed over nodes. None: nothing seen."""

    output_tokens: float | None = None
    prompt_tokens: float | None = None
    # cache hits among `prompt_tokens`, from nodes that expose a prefix-cache counter
    prompt_cached_tokens: float | None = None
    # prompt tokens from nodes that expose no cache counter (billed all as cache miss)
    prompt_tokens_without_cache_figure: float = 0.0
    requests_finished: float | None = None
    # nodes whose engine counters were read for the first time since the last drain
    first_sights: list[FirstSight] = field(default_factory=list)
    # every reading since the last drain, with the counted increases it brings the sums to
    readings: list[Reading] = field(default_factory=list)


@dataclass(frozen=True)
class FirstSight:
    """A node's engine counters read for the first time: what they held, when, and when
    they began (None: the engine does not say)."""

    node: str
    seen_at: float
    born_at: float | None
    values: Mapping[str, float]
    source: str = ""
    as_of: float | None = None  # the time the counters describe (`reading_as_of`)


@dataclass(frozen=True)
class Reading:
    """One reading of a (node, source)'s engine counters: the reset-aware increases counted
    since it was first read (`counted`), as of the time the counters describe."""

    node: str
    source: str
    as_of: float
    counted: Mapping[str, float]
    # the latency histograms goodput reads (TTFT, ITL), cumulative as read; None where this
    # reading had none (a scrape reads them on some rounds only)
    latency: Mapping[str, tuple[tuple[float, float], ...]] | None = None


# the histograms the session's goodput reads over its stretch (monitor/evaluation/goodput.py)
STRETCH_LATENCIES = ("ttft", "itl")

AS_OF_MAX_AGE_S = 3600.0


def reading_as_of(sample: NodeSample) -> float:
    """The time a sample's counters describe: a log's, the stamp of its newest throughput
    line (they move one line at a time, every ten seconds or so, and cover the stretch up to
    it); else when it was taken (a backend's own stamp, for PromQL)."""
    stamp = sample.engine.log_stats_line_at if sample.engine is not None else None
    if stamp is not None and sample.taken_at - AS_OF_MAX_AGE_S <= stamp <= sample.taken_at:
        return stamp
    return sample.taken_at


def _add(a: float | None, b: float | None) -> float | None:
    if b is None:
        return a
    return b if a is None else a + b


class CounterTally:
    """Reset-aware increases of the engine counters, as samples arrive.

    Keyed by (node, source) so that two sources' counters are never subtracted from each
    other; when a node has several engine sources, the one heard from last counts.
    """

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], dict[str, float]] = {}
        self.heard_at: dict[tuple[str, str], float] = {}
        self.pending: dict[tuple[str, str], dict[str, float]] = {}
        # when each counter last went down: a second reset soon after is not trusted
        self.reset_at: dict[tuple[str, str, str], float] = {}
        # steps not counted, by (node, counter): the newest reason
        self.doubts: dict[tuple[str, str], str] = {}
        self.first_sights: list[FirstSight] = []
        self.seen_nodes: set[str] = set()  # nodes whose counters were read at least once
        # per (node, source): the increases counted since it was first read, and its readings
        self.counted: dict[tuple[str, str], dict[str, float]] = {}
        self.readings: list[Reading] = []

    def observe(self, sample: NodeSample) -> None:
        engine = sample.engine
        if sample.error is not None or engine is None:
            return
        key = (sample.node, sample.source)
        if sample.node not in self.seen_nodes:
            values = {n: v for n in TALLIED if (v := getattr(engine, n)) is not None}
            if values:
                self.seen_nodes.add(sample.node)
                born = self._plausible_birth(sample.node, sample.taken_at, engine.counters_started_at, values)
                self.first_sights.append(FirstSight(
                    sample.node, sample.taken_at, born, values, sample.source, reading_as_of(sample)
                ))
        last = self.last.setdefault(key, {})
        pending = self.pending.setdefault(key, {})
        prev_at = self.heard_at.get(key)
        self.heard_at[key] = sample.taken_at
        counted = self.counted.setdefault(key, {})
        for name in TALLIED:
            value = getattr(engine, name)
            if value is None:
                continue
            prev = last.get(name)
            last[name] = value
            if prev is None:
                counted.setdefault(name, 0.0)  # the counters it has: a cache counter or none
                continue
            if prev_at is not None and not self._trusted(key, name, prev_at, prev, sample.taken_at, value):
                continue
            # a counter that went down restarted from zero: it counted `value` since
            step = value - prev if value >= prev else value
            pending[name] = pending.get(name, 0.0) + step
            counted[name] = counted.get(name, 0.0) + step
        if sample.node in self.seen_nodes:
            read = engine.latency_buckets or {}
            latency = {n: b for n in STRETCH_LATENCIES if (b := read.get(n))}
            self.readings.append(Reading(sample.node, sample.source, reading_as_of(sample), dict(counted),
                                         latency or None))

    def _plausible_birth(
        self, node: str, seen_at: float, born_at: float | None, values: Mapping[str, float]
    ) -> float | None:
        """The counters' start, if an engine could have counted what they hold since then
        (a page may claim anything: a start in the future, 1e18 tokens in a minute)."""
        if born_at is None:
            return None
        for name, value in values.items():
            trust = counter_trust(name)
            span_s = seen_at - born_at
            if span_s < 0 or (trust is not None and value > trust.max_per_s * span_s):
                if (node, name) in self.doubts or len(self.doubts) < MAX_TALLY_NOTES:
                    self.doubts[(node, name)] = (
                        f"{node} {name} {fmt_si(value)} could not have been counted since its "
                        "counters began: not counted whole"
                    )
                return None
        return born_at

    def _trusted(
        self, key: tuple[str, str], name: str, prev_at: float, prev: float, at: float, value: float
    ) -> bool:
        trust = counter_trust(name)
        if trust is None:
            return True
        reset_key = (*key, name)
        doubt = step_doubt(prev_at, prev, at, value, trust, self.reset_at.get(reset_key))
        if value < prev:
            self.reset_at[reset_key] = at
        if doubt is None:
            return True
        note_key = (key[0], name)
        if note_key in self.doubts or len(self.doubts) < MAX_TALLY_NOTES:
            self.doubts[note_key] = f"{key[0]} {name} {doubt}: not counted"
        return False

    def drain(self) -> TokenDeltas:
        """Increases since the last drain, one source per node, summed over nodes."""
        chosen: dict[str, tuple[float, tuple[str, str]]] = {}
        for key, at in self.heard_at.items():
            if key[0] not in chosen or at > chosen[key[0]][0]:
                chosen[key[0]] = (at, key)
        out = TokenDeltas()
        for _, key in chosen.values():
            got = self.pending.get(key, {})
            out.output_tokens = _add(out.output_tokens, got.get("generation_tokens_total"))
            out.requests_finished = _add(out.requests_finished, got.get("requests_finished_total"))
            prompt = got.get("prompt_tokens_total")
            out.prompt_tokens = _add(out.prompt_tokens, prompt)
            if prompt is None:
                continue
            if "prompt_cached_tokens_total" in self.last.get(key, {}):
                out.prompt_cached_tokens = _add(
                    out.prompt_cached_tokens, got.get("prompt_cached_tokens_total", 0.0)
                )
            else:
                out.prompt_tokens_without_cache_figure += prompt
        self.pending = {}
        out.first_sights, self.first_sights = self.first_sights, []
        out.readings, self.readings = self.readings, []
        return out

    # a resumed session continues from the counters it last saw, so the tokens produced
    # while infertop was down are still counted (a restarted engine reads as a reset)
    def to_state(self) -> list[dict[str, Any]]:
        return [
            {"node": n, "source": s, "at": self.heard_at.get((n, s)), "last": v,
             "counted": self.counted.get((n, s), {})}
            for (n, s), v in self.last.items()
        ]

    def load_state(self, rows: object) -> None:
        """Rows from `to_state`, read back from a record: raises BadValue on a bad one."""
        for i, row in enumerate(check.sequence(rows, "tally", check.MAX_TALLY_ROWS)):
            where = f"tally[{i}]"
            row = check.mapping(row, where, 5)
            key = (check.text(row.get("node"), f"{where}.node"),
                   check.text(row.get("source"), f"{where}.source"))
            last = check.mapping(row.get("last"), f"{where}.last", len(TALLIED))
            # counters are whatever the engine last said: finite, no more is known of them
            self.last[key] = {
                check.choice(k, f"{where}.last", TALLIED):
                    check.bounded(v, f"{where}.last.{k}", -sys.float_info.max, sys.float_info.max)
                for k, v in last.items()
            }
            if self.last[key]:
                self.seen_nodes.add(key[0])
            counted = check.mapping(row.get("counted", {}), f"{where}.counted", len(TALLIED))
            self.counted[key] = {
                check.choice(k, f"{where}.counted", TALLIED): check.count(v, f"{where}.counted.{k}")
                for k, v in counted.items()
            }
            at = check.optional(check.time_s)(row.get("at"), f"{where}.at")
            if at is not None:
                self.heard_at[key] = at
