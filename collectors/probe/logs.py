"""Engine figures from an engine's log: follow the file, parse the lines we know.

Standard library only: this module is bundled into the probe that runs on the node
(`collectors/probe/bundle.py`), and the local source imports it directly. It never
writes, and nothing from the log leaves the node except the parsed numbers.

Three parts, each in its own module:

* `collectors/probe/log_follower.py`: `LogFollower` follows one file the way `tail -F`
  does (rotation, truncation, partial and over-long lines); `CommandFollower` a command.
* `collectors/probe/log_parsers.py`: parsers turn lines into figures, field by field
  (vLLM's stats and speculative-decoding lines in their several versions, SGLang's,
  user patterns from the layout).
* here: `LogFigures` accumulates per-interval figures into counters, so that the same
  reset-aware rate logic that serves metrics endpoints applies to logs; `LogWatch` ties
  a follower, a parser set and the figures together.

How the counters are derived (each log line covers the interval since the previous one):

* generation / prompt tokens: vLLM prints throughput = tokens in the interval ÷ the
  interval, so tokens = throughput × interval. The interval is the engine's
  ``--log-stats-interval`` (10 s by default), learnt as the median gap between an
  engine's consecutive stats lines (their ``MM-DD hh:mm:ss`` stamps), because vLLM
  stops printing while idle and the first line after a pause still covers one interval
  only. A layout may state it (`interval_s`) instead.
* accepted / draft tokens: the line's ``Accepted: N`` / ``Drafted: M`` counts are added.
* drafts: vLLM defines mean acceptance length = 1 + accepted ÷ drafts, so drafts =
  accepted ÷ (mean length − 1). The printed length has two decimals; when the number of
  speculative positions k is known (the per-position list has k entries) and Drafted ÷ k
  agrees with that estimate within its rounding error, the exact Drafted ÷ k is used.
  With nothing accepted (length 1.00 or nan), drafts = Drafted ÷ k.
* the shortest old line (mean length and per-position rates, no counts): the tokens the
  engine generated in the same interval G come from the stats line just before it; each
  speculative step emits mean-length tokens, so drafts ≈ G ÷ mean length, accepted ≈
  drafts × (length − 1), draft tokens ≈ drafts × k. Approximate: it assumes every token
  came from a speculative step. A note says so.
* V0's ``Speculative metrics`` counts are cumulative already: they are taken as counters.

Malformed lines — a stats line whose fields do not parse, values out of range,
accepted > drafted, over-long lines, a user pattern whose group is not a number — are
counted (`log_lines_skipped_total`) and skipped. Nothing in here raises on input.
"""

from __future__ import annotations

import re
import time
from typing import Any

# The names a log pattern may use, shared with the layout that names them; the SSH bundle
# pastes the files' text above this one instead.
# bundle: strip-begin
from infertop.collectors.probe.log_follower import CommandFollower, LogFollower
from infertop.collectors.probe.log_parsers import LogLineError, log_parser
from infertop.layouts.log_vocabulary import LOG_GAUGE_QUANTITIES

# bundle: strip-end

LOG_LAG_NOTE_BYTES = 1024 * 1024  # further behind the end of the file than this: a note says so
LOG_DEFAULT_INTERVAL_S = 10.0  # vLLM's --log-stats-interval default

_LOG_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


class LogFigures:
    """Counters and gauges accumulated from parsed lines; `engine()` is the reading."""

    def __init__(self, parsers: list, interval_s=None):
        self.parsers = parsers
        self.fixed_interval_s = interval_s
        self.counters: dict[str, float] = {}  # quantity → cumulative value
        self.engine_gauges: dict[str, dict[str, float]] = {}  # engine id → {gauge: value}
        self.lines_parsed = 0
        self.lines_skipped = 0
        self.last_line_at: float | None = None
        # the newest throughput line's own stamp (unix s, the node's local time): where the
        # log's clock stands, so a window's figures can say which lines they cover
        self.stats_line_at: float | None = None
        self.spec_positions = 0  # k, speculative tokens per draft, once known
        self.pending_generation_tokens: float | None = None  # of the latest stats line, for old spec lines
        self.step_engines: set[str] = set()  # engines whose step lines were seen
        self.engine_steps: dict[str, float] = {}  # engine → its steps (lines × passes each)
        self.notes: set[str] = set()
        self.last_gap: float | None = None  # stamp gap before the latest stats line (s)
        self._engine_clock: dict[str, float] = {}  # engine → seconds its lines cover
        self._stamps: dict[str, int] = {}  # engine → last stamp (s)
        self._gaps: list[int] = []  # recent gaps between consecutive stats lines (s)
        self._pattern_seen: dict[tuple[str, int], float] = {}  # entry → its last match time
        # per data-parallel engine (issue 35): the counters its own lines added, credited to
        # the engine of the line being parsed (`current_engine`, set by the parser; None:
        # a line of no engine, e.g. a user pattern's)
        self.rank_counters: dict[str, dict[str, float]] = {}
        self.current_engine: str | None = None
        self.last_stats_engine: str | None = None  # vLLM: whose speculative line comes next

    # -- used by parsers

    def add(self, quantity: str, amount: float) -> None:
        self.counters[quantity] = self.counters.get(quantity, 0.0) + amount
        if self.current_engine is not None:
            mine = self.rank_counters.setdefault(self.current_engine, {})
            mine[quantity] = mine.get(quantity, 0.0) + amount

    def add_steps(self, engine: str, steps: float) -> None:
        """Steps of one engine: counted for it, and as 1 / engines of the node's mean."""
        self.step_engines.add(engine)
        self.engine_steps[engine] = self.engine_steps.get(engine, 0.0) + steps
        self.add("steps", steps / len(self.step_engines))

    def set_counter(self, quantity: str, value: float) -> None:
        self.counters[quantity] = float(value)

    def stats_interval(self, engine: str, stamp) -> float:
        """The interval one stats line covers: stated, else learnt from stamps."""
        self.last_gap = None
        if stamp is not None:
            prev = self._stamps.get(engine)
            self._stamps[engine] = stamp
            if prev is not None and 0 < stamp - prev <= 3600:
                self.last_gap = stamp - prev
                self._gaps = [*self._gaps, stamp - prev][-9:]
        if self.fixed_interval_s:
            return float(self.fixed_interval_s)
        if self._gaps:
            return float(sorted(self._gaps)[len(self._gaps) // 2])
        return LOG_DEFAULT_INTERVAL_S

    def cover(self, engine: str, interval: float, gap) -> None:
        """The log's own clock (`log_stats_seconds`): each engine's throughput line covers
        its interval on that engine's clock, and the node's clock is the furthest of them
        (DP engines print in step; one that idles prints nothing and must not slow it). A
        stamp gap far past the interval (vLLM prints no line while idle: its lines of zeros
        go to debug) adds the silence, at zero throughput — stamps are whole seconds, so
        only a gap over twice the interval plus 1 s."""
        seconds = gap if gap is not None and gap > 2 * interval + 1 else interval
        clock = self._engine_clock.get(engine, 0.0) + seconds
        self._engine_clock[engine] = clock
        self.set_counter("log_stats_seconds", max(self._engine_clock.values()))

    def pattern_interval(self, key) -> float:
        if self.fixed_interval_s:
            return float(self.fixed_interval_s)
        now = self._now
        prev = self._pattern_seen.get(key)
        self._pattern_seen[key] = now
        if prev is None or not 0 < now - prev <= 3600:
            return LOG_DEFAULT_INTERVAL_S
        return now - prev

    # -- feeding

    _now = 0.0

    @property
    def seen_at(self) -> float:
        """When the line being parsed was read (node clock, unix s)."""
        return self._now

    def feed(self, line: str, seen_at: float) -> None:
        """One log line, read at `seen_at` (node clock). Never raises on its content."""
        self._now = seen_at
        self.current_engine = None
        text = _LOG_ANSI.sub("", line) if "\x1b" in line else line
        matched = False
        for parser in self.parsers:
            try:
                matched = parser.parse(text, self) or matched
            except (LogLineError, ValueError, OverflowError, IndexError, TypeError, re.error):
                self.lines_skipped += 1
                return
        if matched:
            self.lines_parsed += 1
            self.last_line_at = seen_at

    def engine(self, source_profile: str) -> dict:
        """The figures in `EngineSample` field names (counters get `_total`)."""
        out: dict[str, Any] = {"source": "log", "profile": source_profile}
        for quantity, value in self.counters.items():
            out[quantity + "_total"] = value
        for gauge in LOG_GAUGE_QUANTITIES:
            values = [g[gauge] for g in self.engine_gauges.values() if gauge in g]
            if values:
                # one line per data-parallel engine: queues add up, KV usage is a mean
                out[gauge] = sum(values) / len(values) if gauge == "kv_cache_usage" else sum(values)
        if self.engine_steps:
            out["steps_by_engine_total"] = dict(self.engine_steps)
        out["log_last_line_at"] = self.last_line_at
        out["log_stats_line_at"] = self.stats_line_at
        out["log_lines_skipped_total"] = self.lines_skipped
        ranks = self.ranks(source_profile)
        if ranks:
            out["ranks"] = ranks
        return out

    def ranks(self, source_profile: str) -> list:
        """Each engine id's own figures (`EngineRankSample` fields), where the log shows
        several engines ("Engine 003:", SGLang's "DP3"); [] otherwise. Named as the engine
        pages name them: vLLM's engine 3 is "engine=3", SGLang's DP3 "dp_rank=3"."""
        ids = {*self.engine_steps, *self.engine_gauges, *self.rank_counters, *self._engine_clock}
        keyed = {}
        for engine_id in ids:
            key = _rank_key(engine_id)
            if key is not None:
                keyed[engine_id] = key
        if len(keyed) < 2:
            return []
        out = []
        for engine_id, (key, dp_rank) in sorted(keyed.items(), key=lambda kv: kv[1][1])[:64]:
            figures: dict[str, Any] = {"source": "log", "profile": source_profile}
            for quantity, value in self.rank_counters.get(engine_id, {}).items():
                figures[quantity + "_total"] = value
            figures.update(self.engine_gauges.get(engine_id, {}))
            steps = self.engine_steps.get(engine_id)
            if steps is not None:
                figures["steps_total"] = steps
                figures["steps_by_engine_total"] = {key: steps}
            clock = self._engine_clock.get(engine_id)
            if clock is not None:
                figures["log_stats_seconds_total"] = clock
            figures["log_last_line_at"] = self.last_line_at
            out.append({"key": key, "dp_rank": dp_rank, "engine": figures})
        return out


def _rank_key(engine_id: str):
    """(rank key, DP rank) of a log's engine id ("003" → ("engine=3", 3), "dp3" →
    ("dp_rank=3", 3)); None for no engine ("-")."""
    m = _RANK_ID.fullmatch(engine_id)
    if m is None:
        return None
    rank = int(m.group(2))
    return (f"dp_rank={rank}" if m.group(1) else f"engine={rank}"), rank


_RANK_ID = re.compile(r"(dp)?([0-9]{1,6})")


class LogWatch:
    """One engine log: a follower plus the figures parsed from it.

    `config` (JSON-able, built from the layout by the non-probe side): ``path`` (a
    file) or ``command`` (an argv whose output is the log); ``pattern_sets`` (names,
    default ``["vllm"]``); ``user_patterns`` (name → list of entries, see
    `PatternParser`); ``interval_s`` (the engine's stats interval, optional);
    ``follow_symlink_out`` (read the file even if it resolves outside its directory);
    ``decode_passes`` (SGLang's --decode-log-interval, 40 if unset).
    """

    def __init__(self, config: dict):
        command = config.get("command")
        self.path = str(config.get("path") or "")
        names = list(config.get("pattern_sets") or ["vllm"])
        user_sets = dict(config.get("user_patterns") or {})
        self.profile = "+".join(names)
        self.figures = LogFigures(
            [log_parser(name, user_sets, config.get("decode_passes")) for name in names],
            config.get("interval_s"),
        )
        self.follower: LogFollower
        if command:
            self.follower = CommandFollower(list(command))
            self.path = self.follower.path
        else:
            self.follower = LogFollower(
                self.path, from_start=bool(config.get("from_start")),
                allow_symlink_out=bool(config.get("follow_symlink_out")),
            )

    def read(self, now=None) -> tuple:
        """(engine reading dict, notes). Call once per probe interval."""
        now = time.time() if now is None else now
        follower = self.follower
        lines, backlog = follower.poll(now)
        if backlog:
            # lines that were there before we joined: their time is at most the file's
            # mtime; they give the gauges and the interval, their counts a baseline
            seen = min(follower.mtime or now, now)
            for line in backlog:
                self.figures.feed(line, seen)
        # while we are behind the end of the file, what we read now was written earlier
        written = follower.written_by(now)
        for line in lines:
            self.figures.feed(line, written)
        notes = ["engine log: " + note for note in sorted(self.figures.notes)]
        if follower.error:
            notes.append(f"engine log {self.path[-120:]}: {follower.error}")
        if follower.lag_bytes > LOG_LAG_NOTE_BYTES:
            notes.append(
                f"engine log {self.path[-120:]}: {follower.lag_bytes / 1e6:.1f} MB behind the end "
                f"of the file; its figures are from lines written {now - written:.0f} s ago or earlier"
            )
        engine = self.figures.engine(self.profile)
        engine["log_lines_skipped_total"] = self.figures.lines_skipped + self.follower.overlong_lines
        return engine, notes

    def close(self) -> None:
        self.follower.close()
