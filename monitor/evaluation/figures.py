"""Per-node figures over a window, from fleet state. Pure: no I/O, no clock of its own.

A node may be covered by several sources (an SSH probe for GPUs and NICs, a scrape of
its engine, …). For each part of a sample the freshest source reporting that part wins,
and rates of that part are taken over that one source's samples, so that two sources'
counters are never subtracted from each other.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol, cast

from pydantic import BaseModel

from infertop.collectors.bounds import counter_trust
from infertop.collectors.fleet import NodeState
from infertop.collectors.pages.draft_positions import position_key
from infertop.collectors.process.loop_stalls import StallTimeline
from infertop.collectors.rates import ratio
from infertop.collectors.sample import EngineSample, GpuSample, NicSample, NodeSample
from infertop.layouts.model import NodeConfig, Thresholds
from infertop.monitor.evaluation.activity import work_pct
from infertop.monitor.evaluation.clock_events import describe as describe_clock_events
from infertop.monitor.evaluation.latency import LATENCIES, LatencyWindow, window_increase
from infertop.monitor.evaluation.scoreboard import latency_figures
from infertop.monitor.evaluation.window_rates import Values, WindowRates, WindowSums
from infertop.monitor.snapshot import EngineView, GpuView, HostView, NicView, NodeStatus


def part_window(
    state: NodeState, part: str, now: float, window_s: float
) -> list[NodeSample]:
    """Samples, oldest first, of the freshest source that reports `part`, within the window.

    The newest sample is always included even when older than the window, so that a
    stale node still shows its last values (greyed, with their age).
    """
    best: NodeSample | None = None
    for sample in state.latest():
        if getattr(sample, part) is not None:
            best = sample
            break
    if best is None:
        return []
    # read through a backend that answers from behind (VictoriaMetrics ~30 s): the window
    # ends at the newest sample it holds, or it would hold only the last two readings
    samples = state.window(best.source, now - (best.backend_behind_s or 0.0) - window_s, min_count=2)
    samples = [s for s in samples if getattr(s, part) is not None]
    return samples or [best]


def gpu_counters(sample: NodeSample) -> Values:
    """The known GPU counters a view derives rates from, keyed (GPU index, field)."""
    return {
        (g.index, attr): value
        for g in sample.gpus or ()
        for attr in ("nvlink_tx_bytes_total", "nvlink_rx_bytes_total")
        if (value := getattr(g, attr)) is not None
    }


#: port error counters → the view's rate of each (node_exporter's netdev and IB counters)
NIC_ERROR_RATES: dict[str, str] = {
    "rx_errors_total": "rx_errors_per_s",
    "tx_errors_total": "tx_errors_per_s",
    "rx_drops_total": "rx_drops_per_s",
    "tx_drops_total": "tx_drops_per_s",
    "link_recoveries_total": "link_recoveries_per_s",
    "link_integrity_errors_total": "link_integrity_errors_per_s",
    # RoCE congestion evidence (pause frames, congestion notifications)
    "rx_pause_total": "rx_pause_per_s",
    "tx_pause_total": "tx_pause_per_s",
    "cnp_sent_total": "cnp_sent_per_s",
    "cnp_handled_total": "cnp_handled_per_s",
    "ecn_marked_total": "ecn_marked_per_s",
}


#: every port counter a view shows the rate of, with that rate's field, in the order they
#: are asked (the order of the doubt notes a rate not trusted leaves)
NIC_RATES: tuple[tuple[str, str], ...] = (
    ("rx_bytes_total", "rx_bytes_per_s"),
    ("tx_bytes_total", "tx_bytes_per_s"),
    ("xmit_wait_total", "xmit_wait_per_s"),
    ("errors_total", "errors_per_s"),
    *NIC_ERROR_RATES.items(),
)


#: the port counters a view derives rates from
NIC_COUNTER_FIELDS = tuple(counter for counter, _ in NIC_RATES)


@lru_cache(maxsize=4096)
def _port_keys(name: str) -> tuple[tuple[tuple[str, str], str], ...]:
    """(key, field) of each counter of the port `name`: the very same key tuples for every
    sample, instead of ~10k new ones a tick at 128 nodes, each kept in the rate windows and
    scanned by the paced collector once (collectors/process/gc_pacing.py)."""
    return tuple(((name, attr), attr) for attr in NIC_COUNTER_FIELDS)


@lru_cache(maxsize=4096)
def pause_priority_key(name: str, priority: str) -> tuple[str, str, str]:
    """The rate key of port `name`'s pause frames of `priority` ("rx3"), ending with the
    field's name as `counter_trust` reads it: one tuple for every sample (see `_port_keys`)."""
    return name, priority, "pause_by_priority_total"


def nic_counters(sample: NodeSample) -> Values:
    """The known port counters a view derives rates from, keyed (port name, field); the
    pause frames of each priority keyed `pause_priority_key`."""
    out: dict[Hashable, float] = {
        key: value
        for n in sample.nics or ()
        for key, attr in _port_keys(n.name)
        if (value := getattr(n, attr)) is not None
    }
    for n in sample.nics or ():
        for priority, value in (n.pause_by_priority_total or {}).items():
            out[pause_priority_key(n.name, priority)] = value
    return out


ENGINE_RATE_FIELDS = (
    "steps_total", "drafts_total", "draft_tokens_total", "accepted_tokens_total",
    "generation_tokens_total", "prompt_tokens_total", "requests_finished_total",
    "requests_aborted_total",
    # the scoreboard's (collectors/pages/histograms.py)
    "prompt_cached_tokens_total", "preemptions_total", "prefix_cache_queries_total",
    "prefix_cache_hits_total", "external_prefix_cache_queries_total",
    "external_prefix_cache_hits_total", "kv_transfer_bytes_total", "kv_transfer_failures_total",
    "kv_transfer_seconds_sum", "kv_transfer_seconds_count", "expert_balancedness_sum",
    "expert_balancedness_count", "kv_transfer_expired_total", "log_stats_seconds_total",
)


def engine_counters(sample: NodeSample) -> Values:
    """The known engine counters a view derives rates from, keyed by field."""
    e = sample.engine
    if e is None:
        return {}
    out: dict[Hashable, float] = {
        attr: value for attr in ENGINE_RATE_FIELDS if (value := getattr(e, attr)) is not None
    }
    for engine, steps in (e.steps_by_engine_total or {}).items():
        out[(engine, "steps_total")] = steps  # keyed like a GPU's counters: (which, field)
    for position, count in enumerate(e.accepted_tokens_by_position_total or ()):
        out[position_key(position)] = count
    return out


def acceptance_by_position(
    sample: EngineSample, rate: Callable[[Hashable], float | None], drafts_per_s: float | None
) -> list[float | None] | None:
    """Per draft position, the share of drafts whose token at that position was accepted:
    Δaccepted[i] / Δdrafts (vLLM's own "per-position acceptance rate"); None where the
    engine serves no per-position counters, or drafted nothing in the window."""
    positions = len(sample.accepted_tokens_by_position_total or ())
    if not positions or not drafts_per_s:
        return None
    return [
        None if (r := rate(position_key(i))) is None else min(r / drafts_per_s, 1.0)
        for i in range(positions)
    ]


def decode_steps_per_s(sample: EngineSample, rate: Callable[[Hashable], float | None]) -> float | None:
    """The fastest engine's step rate over the window, where steps are known per engine;
    else the rate of the mean step count.

    In wide expert parallelism the DP engines step in lockstep, idle ones with dummy
    batches; neither vLLM (steps with output) nor SGLang (decode passes) counts those, so
    the mean over engines would be the lockstep rate times the share of engines busy.
    The fastest engine is the lockstep rate while any engine is busy (docs/engines.md).
    """
    per_engine = [r for engine in sample.steps_by_engine_total or ()
                  if (r := rate((engine, "steps_total"))) is not None]
    return max(per_engine) if per_engine else rate("steps_total")


def _as_read(view: type[BaseModel], sample: type[BaseModel], derived: set[str]) -> tuple[str, ...]:
    """The fields a view shows as the sample read them: every field of the same name,
    less those the evaluation derives. A new figure is a field on both, nothing here."""
    return tuple(sorted((set(view.model_fields) & set(sample.model_fields)) - derived))


GPU_AS_READ = _as_read(GpuView, GpuSample, {"nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s"})
# TRUSTED_VIEWS: GPU and port views are not validated again: their fields are the
# sample's (validated where the sample was made, the same types:
# tests/monitor/test_trusted_views.py holds them so) and rates the evaluation computed.
# 128 nodes × 17 views a tick validated cost ~1.5 % of a core. Each is a blank view
# copied with its fields: `model_construct` resolves every left-out field's default on
# each call, 4× the cost (8.9 against 2.2 µs a port view, 2,176 views a tick at 128
# nodes: a third of Monitor.tick). A copy shares the blank's defaults, so no view field
# may have a mutable default (the same test holds that).
NIC_AS_READ = _as_read(NicView, NicSample, {"rx_bytes_per_s", "tx_bytes_per_s"})
_GPU_BLANK = GpuView.model_construct(index=0)
_NIC_BLANK = NicView.model_construct(name="", kind="other")


def gpu_views(samples: Sequence[NodeSample], rates: WindowRates | None = None) -> list[GpuView]:
    """`rates`: the window's rates kept from the previous tick (`RateCache`); the same
    figures are derived from `samples` alone without it."""
    if not samples:
        return []
    latest = samples[-1]
    assert latest.gpus is not None
    views = []
    for gpu in latest.gpus:
        has_nvlink = gpu.nvlink_tx_bytes_total is not None or gpu.nvlink_rx_bytes_total is not None
        if has_nvlink and rates is None:
            rates = WindowRates(gpu_counters, counter_trust).update(samples)
        # one dict, only what is known: a field left out is None (its default) all the same
        fields = {f: getattr(gpu, f) for f in GPU_AS_READ}
        reasons = gpu.clock_event_reasons
        if reasons is not None:
            fields["clock_events"], fields["clock_event_level"] = describe_clock_events(reasons)
        if has_nvlink and rates is not None:
            # a rate from NVML's cumulative counters, else one an exporter read as a rate
            fields["nvlink_tx_bytes_per_s"] = rates.rate((gpu.index, "nvlink_tx_bytes_total"))
            fields["nvlink_rx_bytes_per_s"] = rates.rate((gpu.index, "nvlink_rx_bytes_total"))
        else:
            fields["nvlink_tx_bytes_per_s"] = gpu.nvlink_tx_bytes_per_s
            fields["nvlink_rx_bytes_per_s"] = gpu.nvlink_rx_bytes_per_s
        views.append(_GPU_BLANK.model_copy(update=fields))  # typed already: see TRUSTED_VIEWS
    return views


def _slow(speed_gbps: float | None, expected_gbps: float | None, rate_ratio: float) -> bool | None:
    if speed_gbps is None or not expected_gbps:
        return None
    return speed_gbps < expected_gbps * rate_ratio


def _above_line(fields: dict[str, object], speed_gbps: float | None) -> list[str]:
    """The byte-rate fields of a port that read above its line rate."""
    if not speed_gbps:
        return []
    line = speed_gbps * 1e9 / 8
    return [f for f in ("rx_bytes_per_s", "tx_bytes_per_s")
            if isinstance(v := fields.get(f), float | int) and v > line]


def nic_views(
    samples: Sequence[NodeSample],
    config: NodeConfig | None,
    rates: WindowRates | None = None,
    rate_ratio: float = Thresholds().link_rate_ratio,
) -> list[NicView]:
    expected = {n.name: n.expected_gbps for n in config.nics} if config else {}
    if not samples:
        # ports the layout expects but nobody reported: shown as unknown, not as fine
        return [NicView(name=name, kind="other", expected_gbps=gbps) for name, gbps in expected.items()]
    latest = samples[-1]
    assert latest.nics is not None
    if rates is None:
        rates = WindowRates(nic_counters, counter_trust).update(samples)
    views = []
    for nic in latest.nics:
        name = nic.name
        expected_gbps = expected.get(name) or (expected.get(nic.netdev) if nic.netdev else None)
        # one dict, only what is known: a rate left out is None (its default) all the same
        fields = {f: getattr(nic, f) for f in NIC_AS_READ}
        fields["slow"] = _slow(nic.speed_gbps, expected_gbps, rate_ratio)
        fields["expected_gbps"] = expected_gbps
        # bytes: the exporter's own rate where no counter is read
        fields["rx_bytes_per_s"] = nic.rx_bytes_per_s
        fields["tx_bytes_per_s"] = nic.tx_bytes_per_s
        for counter, field in NIC_RATES:
            if getattr(nic, counter) is not None:
                fields[field] = rates.rate((name, counter))
        if nic.pause_by_priority_total:
            fields["pause_per_s_by_priority"] = {priority: rates.rate(pause_priority_key(name, priority))
                                                 for priority in nic.pause_by_priority_total}
        above = _above_line(fields, nic.speed_gbps)
        if above:
            # more than the port can carry is a measurement (a too-short interval, a
            # counter read apart from its clock), never a speed: not drawn as one
            fields.update({f: None for f in above}, above_line_rate=True)
        views.append(_NIC_BLANK.model_copy(update=fields))  # typed already: see TRUSTED_VIEWS
    seen = {nic.name for nic in latest.nics}
    for name, gbps in expected.items():
        if name not in seen:
            # expected by the layout, absent on the node: that is itself news
            views.append(NicView(name=name, kind="other", state="missing", expected_gbps=gbps))
    return views


class EngineReading(Protocol):
    """What the engine figures read of a sample: when it was taken and the engine — a
    node's (`NodeSample`), or one data-parallel rank's in the node sample's place
    (`engine_ranks.RankReading`: no copy of the node sample a rank and reading)."""

    @property
    def taken_at(self) -> float: ...

    @property
    def engine(self) -> EngineSample | None: ...


def engine_view(
    samples: Sequence[EngineReading], now: float, rates: WindowRates | None = None
) -> EngineView | None:
    """The engine's figures over the window as a view (`engine_fields`); None without any."""
    made = engine_fields(samples, now, rates)
    return None if made is None else EngineView(**made[0])


def engine_fields(
    samples: Sequence[EngineReading], now: float, rates: WindowRates | None = None
) -> tuple[dict[str, Any], LatencyWindow] | None:
    """The engine's figures over the window (`samples`: the node's engine window, oldest
    first), as `EngineView` fields, so that a node's view is built once with the rest
    (cluster.node_engine); and beside them the window's bucket increases the percentiles
    were made of. None without an engine reading."""
    engines = [s for s in samples if s.engine is not None]
    if not engines:
        return None
    latest_at, latest = engines[-1].taken_at, engines[-1].engine
    assert latest is not None
    # `rates`, when given, is already over these samples (`RateCache.rates`)
    if rates is None:
        rates = WindowRates(engine_counters, counter_trust).update(cast(Sequence[NodeSample], engines))
    rate = rates.rate

    # all rates share one Δt, so their ratios are ratios of the deltas
    accepted = rate("accepted_tokens_total")
    draft_tokens = rate("draft_tokens_total")
    drafts = rate("drafts_total")
    acceptance_length = None if accepted is None or not drafts else 1 + accepted / drafts
    acceptance = ratio(accepted, draft_tokens)
    generated = rate("generation_tokens_total")
    prompt = rate("prompt_tokens_total")
    log_clock = rate("log_stats_seconds_total")  # log seconds per monitor second
    if log_clock:
        # a log's tokens over the time its own lines cover (see EngineSample)
        generated = None if generated is None else generated / log_clock
        prompt = None if prompt is None else prompt / log_clock
    if acceptance is None and acceptance_length is None and generated != 0:
        # no draft counters (SGLang): the engine's own figures over its last stats
        # interval; they hold their last value while the engine idles, so not then
        acceptance, acceptance_length = latest.spec_accept_rate, latest.spec_accept_length
    full = full_acceptance_tokens_per_s(generated, draft_tokens, accepted)
    age = now - (latest.log_last_line_at if latest.log_last_line_at is not None else latest_at)
    window = latency_window(engines)
    return dict(
        **scoreboard_figures(engines, rate, window),
        decode_steps_per_s=decode_steps_per_s(latest, rate),
        draft_acceptance=acceptance,
        mean_acceptance_length=acceptance_length,
        draft_tokens_per_s=draft_tokens,
        acceptance_by_position=acceptance_by_position(latest, rate, drafts),
        accepted_tokens_per_s=generated,
        full_acceptance_tokens_per_s=full,
        requests_running=latest.requests_running,
        requests_waiting=latest.requests_waiting,
        kv_cache_usage=latest.kv_cache_usage,
        prompt_tokens_per_s=prompt,
        requests_finished_per_s=rate("requests_finished_total"),
        requests_aborted_per_s=rate("requests_aborted_total"),
        source=latest.source,
        profile=latest.profile,
        age_s=max(age, 0.0),
        settings=latest.settings,
        healthy=latest.healthy,
        **window_edges(engines),
    ), window


def window_edges(engines: Sequence[EngineReading]) -> dict[str, float | None]:
    """Which readings bound the window's figures (`engines`: samples with an engine, oldest
    first): the first and the last, and for a log the stamps of the newest throughput line
    each had seen — its figures cover the lines after the one and through the other."""
    two = len(engines) >= 2
    stamps = [s.engine.log_stats_line_at for s in engines if s.engine is not None]
    known = [t for t in stamps if t is not None]
    lines = len(known) >= 2
    return {
        "window_first_reading_at": engines[0].taken_at if two else None,
        "window_last_reading_at": engines[-1].taken_at if two else None,
        "log_window_start_at": known[0] if lines else None,
        "log_window_end_at": known[-1] if lines else None,
    }


def full_acceptance_tokens_per_s(
    generated: float | None, draft_tokens: float | None, accepted: float | None
) -> float | None:
    """Tokens/s had every drafted token been accepted: the tokens produced plus the draft
    tokens rejected, (Δgeneration_tokens + Δdraft_tokens − Δaccepted_tokens) / Δt.

    Why, from vLLM's counters: a request's step with k draft tokens of which a were
    accepted produces a + 1 tokens and counts one draft; at full acceptance it would have
    produced k + 1, i.e. k − a more. A step without a draft (n-gram found no match, a
    dynamic drafter proposed nothing, the prefill step that makes each request's first
    token) produces its one token either way. Summed: full = generated + (drafted −
    accepted), never below the accepted tokens/s. With DeepSeek's MTP every decode step
    drafts, so generated = drafts + accepted + one first token per request, and the figure
    is (Δdrafts + Δdraft_tokens)/Δt plus the requests' first tokens/s — the old formula,
    which read 20–32 % low for n-gram drafting (issue 33), plus the prefill's tokens.
    None without all three counters."""
    if generated is None or draft_tokens is None or accepted is None:
        return None
    # a counter read apart from its peers can put accepted a hair above drafted: no negative
    return generated + max(draft_tokens - accepted, 0.0)


def _rate_ratio(rate: Callable[[str], float | None], num: str, den: str) -> float | None:
    return ratio(rate(num), rate(den))


NO_LATENCY_READING = "no latency reading in this window"


def latency_window(engines: Sequence[EngineReading]) -> LatencyWindow:
    """The window's bucket increases of each latency the engine publishes (`engines`:
    samples with an engine, oldest first), the KV transfer time's too (the P→D path's
    percentiles, pd_path.py); empty without two readings of any."""
    readings = [s.engine.latency_buckets if s.engine is not None else None for s in engines]
    window: LatencyWindow = {}
    for name in (*LATENCIES, "kv_transfer"):
        increase = window_increase([r.get(name) if r else None for r in readings])
        if increase is not None:
            window[name] = increase
    return window


def scoreboard_figures(
    engines: Sequence[EngineReading], rate: Callable[[str], float | None], window: LatencyWindow
) -> dict[str, Any]:
    """The scoreboard's engine figures over the window (`engines`: samples with an engine,
    oldest first; `rate`: the window's counter rates; `window`: `latency_window(engines)`)."""
    out = latency_figures(window)
    if not window and any(s.engine is not None and s.engine.latency_buckets for s in engines):
        # buckets read, but not twice in the window: say so rather than show nothing
        out["latency_note"] = NO_LATENCY_READING
    hit_rate = _rate_ratio(rate, "prefix_cache_hits_total", "prefix_cache_queries_total")
    if rate("prefix_cache_queries_total") is None:
        # SGLang counts cached tokens among its prompt tokens
        hit_rate = _rate_ratio(rate, "prompt_cached_tokens_total", "prompt_tokens_total")
    out["prefix_cache_hit_rate"] = hit_rate
    out["external_prefix_cache_hit_rate"] = _rate_ratio(
        rate, "external_prefix_cache_hits_total", "external_prefix_cache_queries_total"
    )
    out["preemptions_per_s"] = rate("preemptions_total")
    latest = engines[-1].engine
    assert latest is not None
    out["kv_transfer_bytes_per_s"] = rate("kv_transfer_bytes_total")
    out["kv_transfer_failures_per_s"] = rate("kv_transfer_failures_total")
    out["kv_transfer_expired_per_s"] = rate("kv_transfer_expired_total")
    out["kv_transfer_mean_s"] = _rate_ratio(rate, "kv_transfer_seconds_sum", "kv_transfer_seconds_count")
    out["kv_transfer_latency_s"] = latest.kv_transfer_latency_s
    out["kv_transfer_speed_bytes_per_s"] = latest.kv_transfer_speed_bytes_per_s
    out["expert_balancedness"] = _rate_ratio(rate, "expert_balancedness_sum", "expert_balancedness_count")
    running = [s.engine.requests_running for s in engines if s.engine is not None]
    known = [r for r in running if r is not None]
    out["requests_running_mean"] = sum(known) / len(known) if known else None
    return out


def per_gpu_and_user(engine: Mapping[str, Any], gpus: int | None) -> dict[str, float | None]:
    """The node's live point from its engine's figures (`engine_fields`): accepted (and
    full-acceptance) tokens/s per GPU, and accepted tokens/s per running request (mean
    over the window)."""
    tokens = engine.get("accepted_tokens_per_s")
    full = engine.get("full_acceptance_tokens_per_s")
    return {
        "output_tokens_per_s_per_gpu": tokens / gpus if tokens is not None and gpus else None,
        "full_acceptance_tokens_per_s_per_gpu": full / gpus if full is not None and gpus else None,
        "output_tokens_per_s_per_user": ratio(tokens, engine.get("requests_running_mean")),
    }


def doubt_notes(part: str, rates: WindowRates | None) -> list[str]:
    """One note per counter whose rate over the window was not trusted (see
    `collectors.rates.step_doubt`): `part` names where it is ("GPU", "port", "engine")."""
    if rates is None:
        return []
    notes = []
    for key, doubt in rates.doubts.items():
        if isinstance(key, tuple):
            where = f"{part} {key[0]} {key[-1]}"  # (GPU index | port name, field)
        else:
            where = f"{part} {key}"
        notes.append(f"{where} {doubt}: rate unknown")
    return notes


def idle_counts(sample: NodeSample, idle_util_pct: float) -> tuple[int, int]:
    """GPU readings of one sample below the idle threshold, and GPU readings known. A GPU
    that reports SM activity is judged on it, not on utilisation (activity.work_pct)."""
    below = known = 0
    for gpu in sample.gpus or ():
        work = work_pct(gpu)
        if work is None:
            continue
        known += 1
        below += work < idle_util_pct
    return below, known


def idle_fraction(
    samples: Sequence[NodeSample], idle_util_pct: float, sums: WindowSums | None = None
) -> float | None:
    """Share of GPU-time in the window below the idle threshold; None without GPU figures.
    `sums`: the window's `idle_counts` kept from the previous tick (the same figure)."""
    if sums is None:
        sums = WindowSums(lambda s: idle_counts(s, idle_util_pct)).update(samples)
    below, known = sums.totals
    return below / known if known else None


def host_view(state: NodeState) -> HostView | None:
    for sample in state.latest():
        if sample.host is not None:
            h = sample.host
            return HostView(
                cpu_pct=h.cpu_pct, mem_used_bytes=h.mem_used_bytes, mem_total_bytes=h.mem_total_bytes
            )
    return None


# The most of a node's age that the monitor's own stalls can excuse. Past it a node is
# judged on its raw age: however starved the monitor, a node silent this much longer than
# the unreachable threshold goes unreachable (a healthy one's samples are late by the
# monitor's lag, seconds; a dead one's age grows without bound).
MAX_EXCUSE_S = 60.0


def excused_s(ok_at: float, now: float, stalls: StallTimeline | None) -> float:
    """Seconds of (ok_at, now] in which the monitor itself stood still, at most
    `MAX_EXCUSE_S`. `stalls`: when the monitor's event loop stood still (wall clock)."""
    return min(stalls.covered_s(ok_at, now), MAX_EXCUSE_S) if stalls else 0.0


def node_status(
    state: NodeState,
    now: float,
    interval_s: float,
    thresholds: Thresholds,
    stalls: StallTimeline | None = None,
    unseen_because: str | None = None,
) -> tuple[NodeStatus, float | None]:
    """ok / stale / unreachable / error / unknown, and the age of the newest good sample.

    `unseen_because`: the node can be seen only through a metrics backend that is down,
    or came back lately and has not scraped it since (monitor.evaluation.backends): not
    fresh, it is `unknown`, the backend's finding, never stale, unreachable or in error
    on its own.

    The rule for a late monitor: a sample's age counts only the time the monitor was
    running. Time its own event loop stood still (`stalls`, measured by
    collectors.process.loop_stalls: a blocked callback, CPU starvation, a suspended process) is
    taken off the age before it is compared with the stale / unreachable thresholds: a
    node cannot have been read while the reader did not run, and the monitor says it
    was late (Snapshot.monitor) instead of blaming the node. A dead node still goes
    unreachable: its age keeps growing while the monitor runs, only later by the time
    the monitor lost, and never more than `MAX_EXCUSE_S` later. The age reported is the
    real one.
    """
    ok_at = state.last_ok_at
    age = None if ok_at is None else max(now - ok_at, 0.0)
    status, age = _own_status(state, now, interval_s, thresholds, stalls, age)
    if status != "ok" and unseen_because is not None:
        return "unknown", age
    return status, age


def _own_status(
    state: NodeState, now: float, interval_s: float, thresholds: Thresholds,
    stalls: StallTimeline | None, age: float | None,
) -> tuple[NodeStatus, float | None]:
    ok_at = state.last_ok_at
    if age is None or ok_at is None:
        # never heard from: an error if a source said why, else "stale" with no age (the
        # JSON status keeps its values); whether it is late yet, or still being read
        # for the first time, is `never_read_late`'s to say
        return ("error" if state.last_error is not None else "stale"), None
    judged = max(age - excused_s(ok_at, now, stalls) - backend_behind_s(state), 0.0)
    if judged > interval_s * thresholds.unreachable_intervals:
        return "unreachable", age
    if judged > interval_s * thresholds.stale_intervals:
        return "stale", age
    if state.error is not None:
        return "error", age
    return "ok", age


def never_read_late(
    watched_since: float | None,
    now: float,
    interval_s: float,
    thresholds: Thresholds,
    stalls: StallTimeline | None = None,
) -> bool:
    """Whether a node never read yet is late: the monitor has watched it (since
    `watched_since`, when it started) for longer than `stale_intervals` of its own running
    time. Before that it is still being read for the first time, not stale: a node cannot
    be late for a reading that was not yet due (the first frame, drawn one interval in on
    a loaded host, once said "decode-09 stale 0s"). The same rule as a read node's age:
    the monitor's own stalls are not the node's. `watched_since` None: not started, late."""
    if watched_since is None:
        return True
    watched = max(now - watched_since, 0.0)
    judged = max(watched - excused_s(watched_since, now, stalls), 0.0)
    return judged > interval_s * thresholds.stale_intervals


def backend_behind_s(state: NodeState) -> float:
    """The delay of the metrics backend the node's newest sample was read from (0: read
    from the node itself): the node is judged against the newest sample that backend
    held, so the backend's delay is said once (Snapshot.backends), not blamed on it."""
    newest = max((ring[-1] for ring in state.by_source.values() if ring),
                 key=lambda s: s.taken_at, default=None)
    return (newest.backend_behind_s or 0.0) if newest is not None else 0.0


def late_by_monitor(
    state: NodeState,
    now: float,
    interval_s: float,
    thresholds: Thresholds,
    stalls: StallTimeline | None,
) -> bool:
    """Whether this node is judged fresh only because the monitor's stalls were excused."""
    ok_at = state.last_ok_at
    if ok_at is None or not stalls:
        return False
    age = max(now - ok_at, 0.0)
    stale_s = interval_s * thresholds.stale_intervals
    return age > stale_s >= age - excused_s(ok_at, now, stalls)
