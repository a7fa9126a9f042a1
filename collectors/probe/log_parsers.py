"""Engine log parsers: lines into figures, field by field, never by matching a whole line,
so that older and newer engine versions (which add or drop fields) both parse.

Standard library only: bundled into the probe that runs on the node
(`collectors/probe/bundle.py`). How the figures become counters: `collectors/probe/logs.py`.

* vLLM's periodic stats line, e.g.
  ``Engine 000: Avg prompt throughput: 93.9 tokens/s, Avg generation throughput:
  13.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%,
  Prefix cache hit rate: 0.0%`` (and the V0 form with ``Swapped``/``Pending``);
* vLLM's speculative-decoding line, e.g. ``SpecDecoding metrics: Mean acceptance
  length: 3.49, Accepted throughput: …, Accepted: 92 tokens, Drafted: 259 tokens,
  Per-position acceptance rate: 0.757, …, Avg Draft acceptance rate: 35.5%`` and its
  older shapes (``Draft acceptance rate … Accepted … Drafted``; ``Mean acceptance
  length`` + per-position rates only; V0's cumulative ``Speculative metrics: …
  Number of accepted tokens: N, Number of draft tokens: M``);
* SGLang's decode lines;
* user patterns from the layout (named regex groups → canonical quantities).

A line whose fields do not parse or whose values are out of range raises `LogLineError`;
`LogFigures.feed` counts it as skipped.
"""

from __future__ import annotations

import math
import re
import time
from typing import TYPE_CHECKING

# The names a log pattern may use, shared with the layout that names them; the SSH bundle
# pastes that file's text above this one instead.
# bundle: strip-begin
from infertop.layouts.log_vocabulary import (
    LOG_GAUGE_QUANTITIES,
    LOG_PATTERN_KINDS,
    LOG_QUANTITIES,
)

if TYPE_CHECKING:
    from infertop.collectors.probe.logs import LogFigures
# bundle: strip-end

_LOG_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_LOG_STAMP = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")


class LogLineError(ValueError):
    """A line that looks like one of ours but does not parse: counted and skipped."""


def _log_num(match, group: int = 1):
    if match is None:
        return None
    value = float(match.group(group))
    return value if math.isfinite(value) else None


def _log_check(value, low: float, high: float, what: str):
    if value is not None and not low <= value <= high:
        raise LogLineError(f"{what} out of range")
    return value


def _log_stamp_s(text: str):
    """Seconds since a fixed origin of a vLLM ``MM-DD hh:mm:ss`` stamp, or None.

    The stamp carries no year and no zone; only differences between stamps of one log are
    used (to learn the stats interval), so neither matters.
    """
    m = _LOG_STAMP.search(text)
    if m is None:
        return None
    month, day, hour, minute, second = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    days_before = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)
    return (((days_before[month - 1] + day) * 24 + hour) * 60 + minute) * 60 + second


def log_stamp_unix(text: str, seen_at: float):
    """A line's own stamp as unix seconds, read as the node's local time (as the engine
    wrote it), or None. vLLM's ``MM-DD hh:mm:ss`` has no year: the year of `seen_at`
    (when the line was read), the year before where that would put it in the future
    (a line of 12-31 read on 01-01). SGLang's ``YYYY-MM-DD hh:mm:ss[.ffffff]`` has one."""
    m = _SGLANG_STAMP.search(text)
    try:
        if m is not None:
            year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
            frac = m.group(7)
            fraction = int(frac) / 10 ** len(frac) if frac else 0.0
            return time.mktime((year, month, day, hour, minute, second, 0, 0, -1)) + fraction
        m = _LOG_STAMP.search(text)
        if m is None or _log_stamp_s(m.group(0)) is None:
            return None
        month, day, hour, minute, second = (int(g) for g in m.groups())
        year = time.localtime(seen_at).tm_year
        stamp = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
        if stamp > seen_at + 86400:
            stamp = time.mktime((year - 1, month, day, hour, minute, second, 0, 0, -1))
        return stamp
    except (OverflowError, ValueError):
        return None


class VllmParser:
    """vLLM-style stats and speculative-decoding lines, matched field by field."""

    name = "vllm"

    _STATS_MARK = re.compile(r"Avg (?:prompt|generation) throughput:")
    _ENGINE = re.compile(r"\bEngine (\d{1,6}):")
    _PROMPT = re.compile(r"Avg prompt throughput: " + _LOG_NUM + r" tokens/s")
    _GEN = re.compile(r"Avg generation throughput: " + _LOG_NUM + r" tokens/s")
    _RUNNING = re.compile(r"\bRunning: (\d+) reqs")
    _WAITING = re.compile(r"\b(?:Waiting|Pending): (\d+) reqs")
    # "%s KV cache usage": GPU on CUDA, else the device type in capitals (NPU under
    # vLLM-Ascend, XPU, CPU); very old lines print no device
    _KV = re.compile(r"(?:\b[A-Z]{2,8} |(?<![A-Za-z] ))KV cache usage: " + _LOG_NUM + "%")
    # --enable-logging-iteration-details: one line per engine step (vLLM 0.33 loggers.py)
    _ITERATION = re.compile(r"\bIteration\((\d+)\): \d+ context requests")

    _SPEC_MARK = re.compile(r"\b(?:SpecDecoding|Speculative) metrics:")
    _MEAN_LEN = re.compile(r"Mean acceptance length: " + _LOG_NUM)
    _ACCEPTED = re.compile(r"\bAccepted: (\d+) tokens")
    _DRAFTED = re.compile(r"\bDrafted: (\d+) tokens")
    _PER_POS = re.compile(r"Per-position acceptance rate: ([0-9.,\s]+)")
    _V0_K = re.compile(r"Number of speculative tokens: (\d+)")
    _V0_ACCEPTED = re.compile(r"Number of accepted tokens: (\d+)")
    _V0_DRAFT = re.compile(r"Number of draft tokens: (\d+)")

    def parse(self, text: str, figures: LogFigures) -> bool:
        if self._STATS_MARK.search(text):
            self._stats(text, figures)
            return True
        if self._SPEC_MARK.search(text):
            self._spec(text, figures)
            return True
        if self._ITERATION.search(text):
            self._iteration(text, figures)
            return True
        return False

    def _iteration(self, text: str, figures: LogFigures) -> None:
        """One engine step. Every DP engine prints its own (idle ones their dummy steps,
        taken in lockstep), so each line counts 1 / engines: the node's decode steps are
        one engine's. Tokens are left to the stats line (counting both would double)."""
        engine_m = self._ENGINE.search(text)
        engine = engine_m.group(1) if engine_m else "-"
        figures.add_steps(engine, 1.0)
        kv_pct = _log_check(_log_num(self._KV.search(text)), 0, 100.5, "KV cache usage")
        if kv_pct is not None:
            figures.engine_gauges.setdefault(engine, {})["kv_cache_usage"] = min(kv_pct / 100.0, 1.0)

    def _stats(self, text: str, figures: LogFigures) -> None:
        engine_m = self._ENGINE.search(text)
        engine = engine_m.group(1) if engine_m else "-"
        prompt_tps = _log_check(_log_num(self._PROMPT.search(text)), 0, 1e9, "prompt throughput")
        gen_tps = _log_check(_log_num(self._GEN.search(text)), 0, 1e9, "generation throughput")
        running = _log_check(_log_num(self._RUNNING.search(text)), 0, 1e7, "running")
        waiting = _log_check(_log_num(self._WAITING.search(text)), 0, 1e8, "waiting")
        kv_pct = _log_check(_log_num(self._KV.search(text)), 0, 100.5, "KV cache usage")
        if prompt_tps is None and gen_tps is None:
            raise LogLineError("stats line without a throughput figure")
        # this line's counts are its engine's (a rank of its own where the log shows several)
        figures.current_engine = figures.last_stats_engine = engine
        interval = figures.stats_interval(engine, _log_stamp_s(text))
        figures.cover(engine, interval, figures.last_gap)
        figures.stats_line_at = log_stamp_unix(text, figures.seen_at)
        if prompt_tps is not None:
            figures.add("prompt_tokens", prompt_tps * interval)
        gen_tokens = None
        if gen_tps is not None:
            gen_tokens = gen_tps * interval
            figures.add("generation_tokens", gen_tokens)
        figures.pending_generation_tokens = gen_tokens
        gauges = figures.engine_gauges.setdefault(engine, {})
        if running is not None:
            gauges["requests_running"] = running
        if waiting is not None:
            gauges["requests_waiting"] = waiting
        if kv_pct is not None:
            gauges["kv_cache_usage"] = min(kv_pct / 100.0, 1.0)

    def _spec(self, text: str, figures: LogFigures) -> None:
        # the speculative line has no engine prefix: each engine's logger prints it right
        # after that engine's stats line (vLLM 0.33 LoggingStatLogger.log), so it is that one's
        figures.current_engine = figures.last_stats_engine
        v0_accepted = self._V0_ACCEPTED.search(text)
        if v0_accepted is not None:
            self._spec_v0(text, figures, int(v0_accepted.group(1)))
            return
        mean_len = _log_check(_log_num(self._MEAN_LEN.search(text)), 1, 1e4, "mean acceptance length")
        accepted_m = self._ACCEPTED.search(text)
        drafted_m = self._DRAFTED.search(text)
        rates = self._per_position(text)
        if rates:
            figures.spec_positions = len(rates)
        k = figures.spec_positions
        if accepted_m is None or drafted_m is None:
            # the shortest old shape: ratios only; scale them by the interval's tokens
            gen = figures.pending_generation_tokens
            if mean_len is None:
                raise LogLineError("speculative line without counts or mean length")
            figures.pending_generation_tokens = None
            if gen is None or not k:
                return  # nothing to scale by: a valid line that yields no counters
            drafts = gen / mean_len
            figures.add("drafts", drafts)
            figures.add("accepted_tokens", drafts * (mean_len - 1))
            figures.add("draft_tokens", drafts * k)
            figures.notes.add("draft counts derived from mean acceptance length (approximate)")
            return
        accepted = int(accepted_m.group(1))
        drafted = int(drafted_m.group(1))
        if accepted > drafted:
            raise LogLineError("accepted more tokens than drafted")
        figures.add("accepted_tokens", accepted)
        figures.add("draft_tokens", drafted)
        drafts = self._drafts(accepted, drafted, mean_len, k)
        if drafts is not None:
            figures.add("drafts", drafts)
        figures.pending_generation_tokens = None

    @staticmethod
    def _drafts(accepted: int, drafted: int, mean_len, k):
        if accepted > 0 and mean_len is not None and mean_len > 1:
            estimate = accepted / (mean_len - 1)
            if k:
                # the length is printed to ±0.005: how far that moves the estimate
                tolerance = 0.005 * accepted / (mean_len - 1) ** 2 + 1
                if abs(drafted / k - estimate) <= tolerance:
                    return drafted / k
            return float(round(estimate))
        if accepted == 0 and k:
            return drafted / k
        if drafted == 0:
            return 0.0
        return None

    def _per_position(self, text: str) -> list:
        m = self._PER_POS.search(text)
        if m is None:
            return []
        rates = []
        for piece in m.group(1).split(","):
            piece = piece.strip()
            if not piece:
                break
            try:
                value = float(piece)
            except ValueError:
                break
            if not 0 <= value <= 1:
                raise LogLineError("per-position rate out of range")
            rates.append(value)
        return rates[:64]

    def _spec_v0(self, text: str, figures: LogFigures, accepted: int) -> None:
        draft_m = self._V0_DRAFT.search(text)
        k_m = self._V0_K.search(text)
        if draft_m is None:
            raise LogLineError("V0 speculative line without draft tokens")
        drafted = int(draft_m.group(1))
        if accepted > drafted:
            raise LogLineError("accepted more tokens than drafted")
        # V0 prints totals since the engine started: they are counters already
        figures.set_counter("accepted_tokens", accepted)
        figures.set_counter("draft_tokens", drafted)
        k = int(k_m.group(1)) if k_m else 0
        if k > 0:
            figures.spec_positions = k
            figures.set_counter("drafts", drafted / k)


_SGLANG_STAMP = re.compile(r"\b(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\b")


class SglangParser:
    """SGLang's scheduler line, printed every `--decode-log-interval` decode passes (40 by
    default) by each DP rank's logging scheduler (SGLang 0.5.23 metrics_reporter.py):

    ``[2026-11-30 10:00:01 DP3 TP3 EP3] Decode batch, #running-req: 48, #token: 9120,
    token usage: 0.41, accept len: 3.21, accept rate: 0.74, cuda graph: True,
    gen throughput (token/s): 4567.89, #queue-req: 2``

    Steps: the interval's passes, counted 1 / engines per engine line (the node's decode
    steps are one engine's). Tokens: throughput × the time since that engine's previous
    line (its stamps; to the millisecond with SGLANG_LOG_MS). Speculative counts from the
    interval's tokens G, accept len L and rate r: drafts = G ÷ L, accepted = drafts ×
    (L − 1), draft tokens = accepted ÷ r, so the derived acceptance and length are L and r.
    """

    name = "sglang"
    decode_log_interval = 40

    _MARK = re.compile(r"\bDecode batch\b")
    _DP = re.compile(r"\bDP(\d{1,6})\b")
    _RUNNING = re.compile(r"#running-req: (\d+)")
    _QUEUE = re.compile(r"#queue-req: (\d+)")
    _USAGE = re.compile(r"(?<![a-z] )(?<!swa )\btoken usage: " + _LOG_NUM)
    _ACCEPT_LEN = re.compile(r"\baccept len: " + _LOG_NUM)
    _ACCEPT_RATE = re.compile(r"\baccept rate: " + _LOG_NUM)
    _GEN = re.compile(r"gen throughput \(token/s\): " + _LOG_NUM)

    def __init__(self, decode_passes=None) -> None:
        if decode_passes:
            self.decode_log_interval = int(decode_passes)
        self._last: dict[str, float] = {}  # engine → stamp of its previous line
        self._gaps: list[float] = []

    @staticmethod
    def _stamp(text: str):
        m = _SGLANG_STAMP.search(text)
        if m is None:
            return None
        whole = _log_stamp_s(f"{m.group(2)}-{m.group(3)} {m.group(4)}:{m.group(5)}:{m.group(6)}")
        if whole is None:
            return None
        frac = m.group(7)
        return whole + (int(frac) / 10 ** len(frac) if frac else 0.0)

    def _gap(self, engine: str, stamp) -> float | None:
        if stamp is None:
            return None
        prev = self._last.get(engine)
        self._last[engine] = stamp
        if prev is not None and 0 < stamp - prev <= 600:
            self._gaps = [*self._gaps, stamp - prev][-9:]
            return stamp - prev
        return None

    def parse(self, text: str, figures: LogFigures) -> bool:
        if not self._MARK.search(text):
            return False
        dp = self._DP.search(text)
        engine = "dp" + dp.group(1) if dp else "-"
        running = _log_check(_log_num(self._RUNNING.search(text)), 0, 1e7, "running")
        waiting = _log_check(_log_num(self._QUEUE.search(text)), 0, 1e8, "queue")
        usage = _log_check(_log_num(self._USAGE.search(text)), 0, 1.005, "token usage")
        gen_tps = _log_check(_log_num(self._GEN.search(text)), 0, 1e9, "gen throughput")
        length = _log_check(_log_num(self._ACCEPT_LEN.search(text)), 0, 1e4, "accept len")
        rate = _log_check(_log_num(self._ACCEPT_RATE.search(text)), 0, 1.005, "accept rate")
        if gen_tps is None and running is None:
            raise LogLineError("decode line without running requests or throughput")
        figures.current_engine = engine
        figures.add_steps(engine, self.decode_log_interval)
        gap = self._gap(engine, self._stamp(text))
        gauges = figures.engine_gauges.setdefault(engine, {})
        if running is not None:
            gauges["requests_running"] = running
        if waiting is not None:
            gauges["requests_waiting"] = waiting
        if usage is not None:
            gauges["kv_cache_usage"] = min(usage, 1.0)
        if gen_tps is None or gap is None:
            return True  # an engine's first line: the time it covers is not known yet
        tokens = gen_tps * gap
        figures.add("generation_tokens", tokens)
        figures.cover(engine, gap, gap)
        figures.stats_line_at = log_stamp_unix(text, figures.seen_at)
        if length is not None and length >= 1 and tokens > 0:
            drafts = tokens / length
            accepted = drafts * (length - 1)
            figures.add("drafts", drafts)
            figures.add("accepted_tokens", accepted)
            if rate:
                figures.add("draft_tokens", accepted / rate)
        return True


class PatternParser:
    """User patterns: regexes whose named groups are canonical quantities.

    Each entry: `regex`; `field` (the quantity, or None to take every named group whose
    name is a quantity); `kind`: ``counter`` (a cumulative total as printed), ``count``
    (a per-line count, accumulated), ``rate`` (a per-second figure over the log
    interval, × interval then accumulated) or ``gauge``; `scale` multiplies the value
    (e.g. 0.01 for a percentage). With `field` set, the value is the group named after
    the field, else the group ``value``, else the only group.
    """

    def __init__(self, name: str, entries: list):
        self.name = name
        self.entries = []
        for entry in entries:
            regex = re.compile(str(entry["regex"]))
            field = entry.get("field")
            kind = entry.get("kind") or "count"
            if kind not in LOG_PATTERN_KINDS:
                raise ValueError(f"kind {kind!r} is not one of {', '.join(LOG_PATTERN_KINDS)}")
            if field is not None and field not in LOG_QUANTITIES:
                raise ValueError(f"field {field!r} is not a canonical quantity")
            scale = float(entry.get("scale", 1.0))
            self.entries.append((regex, field, kind, scale))

    @staticmethod
    def _targets(regex, field, m) -> list:
        if field is None:
            return [(name, value) for name, value in m.groupdict().items() if name in LOG_QUANTITIES]
        groups = m.groupdict()
        if field in groups:
            return [(field, groups[field])]
        if "value" in groups:
            return [(field, groups["value"])]
        if regex.groups == 1:
            return [(field, m.group(1))]
        return []

    def parse(self, text: str, figures: LogFigures) -> bool:
        values = []  # (quantity, kind, value, pattern index)
        for index, (regex, field, kind, scale) in enumerate(self.entries):
            m = regex.search(text)
            if m is None:
                continue
            for quantity, raw in self._targets(regex, field, m):
                if raw is None:
                    continue  # an optional group that did not take part
                try:
                    value = float(raw.replace(",", "")) * scale
                except (ValueError, AttributeError):
                    raise LogLineError(f"pattern group {quantity} is not a number") from None
                if not math.isfinite(value) or value < 0:
                    raise LogLineError(f"pattern group {quantity} out of range")
                values.append((quantity, kind, value, index))
        if not values:
            return False
        got = {q: (k, v, i) for q, k, v, i in values}
        # helpers: drafts from mean acceptance length, draft tokens from acceptance rate
        accepted = got.get("accepted_tokens")
        mean_len = got.pop("mean_acceptance_length", None)
        acceptance = got.pop("draft_acceptance", None)
        if accepted is not None and mean_len is not None and "drafts" not in got and mean_len[1] > 1:
            got["drafts"] = (accepted[0], accepted[1] / (mean_len[1] - 1), accepted[2])
        if accepted is not None and acceptance is not None and "draft_tokens" not in got:
            rate = acceptance[1] / 100.0 if acceptance[1] > 1 else acceptance[1]  # % or 0–1
            if rate > 0:
                got["draft_tokens"] = (accepted[0], accepted[1] / rate, accepted[2])
        for quantity, (kind, value, index) in got.items():
            if quantity in LOG_GAUGE_QUANTITIES:
                if quantity == "kv_cache_usage" and value > 1:
                    value = value / 100.0  # printed as a percentage
                figures.engine_gauges.setdefault("-", {})[quantity] = value
            elif kind == "gauge" or kind == "counter":
                figures.set_counter(quantity, value)
            elif kind == "rate":
                figures.add(quantity, value * figures.pattern_interval((self.name, index)))
            else:
                figures.add(quantity, value)
        return True


# DeepInfer's offline example (examples/offline_inference.py) prints output-token counts,
# draft acceptance and decode perplexity, in no documented format. This set is a starting
# point: check each regex against your own log and copy the set into the layout's
# [log_patterns] under a new name to adjust it.
DEEPINFER_OFFLINE_PATTERNS = [
    {
        "regex": r"(?i)\b(?:num(?:ber of)? )?output[ _]tokens?\s*[:=]\s*(?P<generation_tokens>\d+)",
        "kind": "count",
    },
    {
        "regex": r"(?i)\baccepted[ _]tokens?\s*[:=]\s*(?P<accepted_tokens>\d+)",
        "kind": "count",
    },
    {
        "regex": r"(?i)\bdraft[ _]tokens?\s*[:=]\s*(?P<draft_tokens>\d+)",
        "kind": "count",
    },
    {
        "regex": r"(?i)\b(?:draft )?acceptance(?: rate)?\s*[:=]\s*(?P<draft_acceptance>[\d.]+)\s*%?",
        "kind": "gauge",
    },
    {
        "regex": r"(?i)\bmean acceptance length\s*[:=]\s*(?P<mean_acceptance_length>[\d.]+)",
        "kind": "gauge",
    },
    {
        "regex": r"(?i)\bthroughput\s*[:=]\s*(?P<generation_tokens>[\d.]+)\s*tok(?:en)?s?/s",
        "kind": "rate",
    },
]


def log_parser(name: str, user_sets: dict, decode_passes=None):
    if name in user_sets:
        return PatternParser(name, user_sets[name])
    if name == "vllm":
        return VllmParser()
    if name == "sglang":
        return SglangParser(decode_passes)
    if name == "deepinfer-offline":
        return PatternParser(name, DEEPINFER_OFFLINE_PATTERNS)
    raise ValueError(f"unknown log pattern set {name!r}")
