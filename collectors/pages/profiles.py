"""Engine profiles: which metric names hold each canonical engine quantity.

Bundled: `vllm` (V1 names, older names accepted after them), `sglang`, and `deepinfer`
(DeepInfer is built on vLLM, so it reads vLLM names unless the layout says otherwise).
A layout may add its own under ``[profiles.<name>]``: canonical field → metric name or
list of names (first present wins), optionally ``extends = "vllm"`` to start from a
bundled profile. Keys are the canonical names of docs/engines.md (``steps``, ``drafts``, …,
``ttft_seconds`` / ``itl_seconds`` for histograms, by base name) or the `EngineSample`
field names (``steps_total``, ``ttft_seconds_sum``, …).

How several series of one metric (vLLM's `engine` label per data-parallel engine,
SGLang's `dp_rank`, `tp_rank`, `priority`, `mode`, …) become one figure:
- first, series a profile does not count are dropped (`Profile.series_filters`): vLLM's
  `request_success{finished_reason}` counts stop / length as finished and abort / error /
  repetition apart; SGLang's passes count decode modes only, its live tokens `mode="decode"` only,
  and its queue gauges the `priority=""` total only (per-priority series repeat it);
- then copies are dropped (`Profile.replica_labels`): with
  `--enable-metrics-for-all-schedulers` every SGLang tensor-parallel rank exports the
  same figures under its own `tp_rank` (and `moe_ep_rank`; its pass counter even
  without the flag), so of the series that differ only by those labels the largest is
  kept (copies are equal; with pipeline parallelism the stage that saw the work wins);
- counters and the running / waiting gauges are then summed — each series counts its
  own requests and tokens;
- `steps_total` is summed within each data-parallel engine (series told apart by
  `ENGINE_LABELS`), kept per engine (`steps_by_engine_total`) and *averaged* over
  engines: in wide expert parallelism every DP engine steps in lockstep with its peers,
  so the node's decode steps/s is one engine's rate, not the sum (which would grow with
  the number of engines). Neither engine counts the steps of an idle engine, so the
  evaluation takes the fastest engine's rate over its window (docs/engines.md);
- `kv_cache_usage` is the mean (each engine has its own KV pool of the same size);
- `spec_accept_rate` / `spec_accept_length` (SGLang's gauges) are averaged over the
  engines that report a length, weighted by the verify calls
  (`sglang:spec_verify_calls_total`) of the series sharing their labels; unknown while
  no verify call was counted (speculative decoding off, or nothing finished yet).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from infertop.collectors.pages.draft_positions import PER_POSITION_NAMES, accepted_by_position
from infertop.collectors.pages.engine_info import engine_info_fields, info_names
from infertop.collectors.pages.engine_ranks import engine_ranks
from infertop.collectors.pages.exposition import Exposition, ExpositionError, duplicate_note, parse_exposition
from infertop.collectors.pages.histograms import LATENCY_BUCKET_NAMES, scoreboard_fields, wanted_names
from infertop.collectors.safe_text import redact_url
from infertop.collectors.sample import EngineSample, EngineSourceKind

CustomProfiles = Mapping[str, Mapping[str, str | list[str]]]
Aggregate = Literal["sum", "mean"]

# canonical short name (docs/engines.md) → EngineSample field, for scalar quantities
_SCALAR_FIELDS: dict[str, str] = {
    "steps": "steps_total",
    "drafts": "drafts_total",
    "draft_tokens": "draft_tokens_total",
    "accepted_tokens": "accepted_tokens_total",
    "generation_tokens": "generation_tokens_total",
    "prompt_tokens": "prompt_tokens_total",
    "prompt_cached_tokens": "prompt_cached_tokens_total",
    "requests_finished": "requests_finished_total",
    "requests_aborted": "requests_aborted_total",
    "requests_running": "requests_running",
    "requests_waiting": "requests_waiting",
    "kv_cache_usage": "kv_cache_usage",
    "spec_accept_rate": "spec_accept_rate",
    "spec_accept_length": "spec_accept_length",
    "spec_verify_calls": "spec_verify_calls",
}
# histogram short name → (EngineSample sum field, count field)
_HISTOGRAMS: dict[str, tuple[str, str]] = {
    "ttft_seconds": ("ttft_seconds_sum", "ttft_seconds_count"),
    "itl_seconds": ("itl_seconds_sum", "itl_seconds_count"),
}
_MEAN_FIELDS = frozenset({"kv_cache_usage"})
# gauges averaged with the verify calls as weights (SGLang), and the field naming them
_SPEC_GAUGE_FIELDS = frozenset({"spec_accept_rate", "spec_accept_length"})
_SPEC_WEIGHT_FIELD = "spec_verify_calls"
PROCESS_START = "process_start_time_seconds"  # prometheus_client's process collector
# labels that tell one data-parallel engine from another (vLLM, SGLang)
ENGINE_LABELS: tuple[str, ...] = ("engine", "dp_rank")


@dataclass(frozen=True)
class Profile:
    """Metric names per canonical quantity; in each tuple the first present name wins."""

    name: str
    scalars: Mapping[str, tuple[str, ...]]  # EngineSample field → metric sample names
    histograms: Mapping[str, tuple[str, ...]]  # "ttft_seconds" / "itl_seconds" → base names
    # sample name → label → the values a counted series may have ("" also admits a
    # series without the label); series of that name with any other value are dropped
    series_filters: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    # EngineSample field → label filter for that field only, in place of the name's own
    # (two fields read one counter: vLLM's finished and aborted requests)
    field_filters: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    # labels whose values only tell copies of one figure apart (one series kept)
    replica_labels: tuple[str, ...] = ()

    def filter_for(self, field_name: str, sample_name: str) -> Mapping[str, frozenset[str]] | None:
        found = self.field_filters.get(field_name)
        return found if found is not None else self.series_filters.get(sample_name)

    def metric_names(self) -> list[str]:
        """Every sample name this profile may read (for PromQL and for filtering)."""
        out = [n for names in self.scalars.values() for n in names]
        out += [f"{b}{suffix}" for bases in self.histograms.values() for b in bases
                for suffix in ("_sum", "_count")]
        return out

    def birth_names(self) -> list[str]:
        """Samples that say when the output-token counter began: its `_created` series
        (prometheus_client writes one per counter series) and the process start time."""
        created = [
            n.removesuffix("_total") + "_created"
            for n in self.scalars.get("generation_tokens_total", ())
            if n.endswith("_total")
        ]
        return [*created, PROCESS_START]

    @functools.cached_property
    def own_names(self) -> frozenset[str]:
        """`metric_names` and `birth_names` as a set."""
        return frozenset([*self.metric_names(), *self.birth_names()])

    @functools.cached_property
    def wanted(self) -> frozenset[str]:
        """`own_names`, for `parse_exposition(wanted=…)`, with the scoreboard's names
        (`collectors.pages.histograms`: engine-prefixed, read on any profile)."""
        return self.own_names | wanted_names() | info_names() | frozenset(PER_POSITION_NAMES)

    @functools.cached_property
    def wanted_without_latency(self) -> frozenset[str]:
        """`wanted` less the latency histograms' buckets (a page read on a round that skips
        them: `collectors.sources.scrape`), unless the profile reads such a name itself."""
        return self.wanted - (LATENCY_BUCKET_NAMES - self.own_names)


class ProfileError(ValueError):
    """A custom profile the layout got wrong; `field` is its path under `profiles`."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


# vLLM names as of vLLM 0.33.0 (vllm/v1/metrics/loggers.py, docs/engines.md); the second
# name of a pair is the older one, read only where the newer one is absent.
_VLLM = Profile(
    name="vllm",
    scalars={
        # vLLM has no step counter: each engine step that produced output observes the
        # histogram once (docs/engines.md: what decode steps/s means)
        "steps_total": ("vllm:iteration_tokens_total_count",),
        "drafts_total": ("vllm:spec_decode_num_drafts_total",),
        "draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
        "accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
        "generation_tokens_total": ("vllm:generation_tokens_total",),
        "prompt_tokens_total": ("vllm:prompt_tokens_total",),
        # cached prompt tokens, local prefix cache + external (KV connector, i.e. sent by
        # the prefill pool under disaggregation); older builds: the local hits only
        "prompt_cached_tokens_total": ("vllm:prompt_tokens_cached_total", "vllm:prefix_cache_hits_total"),
        "requests_finished_total": ("vllm:request_success_total",),
        "requests_aborted_total": ("vllm:request_success_total",),
        "requests_running": ("vllm:num_requests_running",),
        "requests_waiting": ("vllm:num_requests_waiting",),
        # gpu_cache_usage_perc: removed upstream (renamed kv_cache_usage_perc in 0.9);
        # a fallback for older builds only
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    histograms={
        "ttft_seconds": ("vllm:time_to_first_token_seconds",),
        # time_per_output_token_seconds: removed upstream (now inter_token_latency_seconds);
        # a fallback for older builds only
        "itl_seconds": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    },
    series_filters={
        # request_success counts every finish: only stop / length are finished work
        # ($ per finished request); abort / error / repetition (a degenerate answer the
        # engine cut) are shown apart
        "vllm:request_success_total": {"finished_reason": frozenset({"stop", "length"})},
    },
    # the same counter, read a second time for the requests that did not finish normally
    field_filters={
        "requests_aborted_total": {"finished_reason": frozenset({"abort", "error", "repetition"})},
    },
)

# SGLang names as of SGLang 0.5.23 (python/sglang/srt/observability/metrics_collector.py)
_SGLANG_DECODE_MODES = frozenset({"decode_cuda_graph", "decode_none"})
_SGLANG = Profile(
    name="sglang",
    scalars={
        # forward passes by CUDA-graph mode (recent builds only); older builds: unknown
        "steps_total": ("sglang:cuda_graph_passes_total",),
        # decode tokens counted as they are generated; generation_tokens_total only
        # moves when a request finishes (late and in bursts): a fallback for old builds
        "generation_tokens_total": ("sglang:realtime_tokens_total", "sglang:generation_tokens_total"),
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "prompt_cached_tokens_total": ("sglang:cached_tokens_total",),
        # every finished request, aborted ones included (SGLang splits no finish reason)
        "requests_finished_total": ("sglang:num_requests_total",),
        "requests_aborted_total": ("sglang:num_aborted_requests_total",),
        "requests_running": ("sglang:num_running_reqs",),
        "requests_waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        # speculative decoding exists only as gauges, rewritten every decode log interval
        # (40 passes by default), and a verify-call counter used to weigh them
        "spec_accept_rate": ("sglang:spec_accept_rate",),
        "spec_accept_length": ("sglang:spec_accept_length",),
        "spec_verify_calls": ("sglang:spec_verify_calls_total",),
    },
    histograms={
        "ttft_seconds": ("sglang:time_to_first_token_seconds",),
        "itl_seconds": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    },
    series_filters={
        # passes of prefill batches are not decode steps
        "sglang:cuda_graph_passes_total": {"mode": _SGLANG_DECODE_MODES},
        "sglang:realtime_tokens_total": {"mode": frozenset({"decode"})},
        # with --enable-priority-scheduling: the total under priority="", then one series
        # per priority repeating a share of it
        "sglang:num_running_reqs": {"priority": frozenset({""})},
        "sglang:num_queue_reqs": {"priority": frozenset({""})},
    },
    replica_labels=("tp_rank", "moe_ep_rank", "pp_rank"),
)

BUNDLED_PROFILES: dict[str, Profile] = {
    "vllm": _VLLM,
    "sglang": _SGLANG,
    "deepinfer": Profile(
        name="deepinfer", scalars=_VLLM.scalars, histograms=_VLLM.histograms,
        series_filters=_VLLM.series_filters, field_filters=_VLLM.field_filters,
    ),
}


def _names(value: object, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ProfileError(field, "expected a metric name or a non-empty list of names")
    for name in value:
        if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
            raise ProfileError(field, f"{name!r} is not a metric name")
    return tuple(value)


def custom_profile(name: str, mapping: Mapping[str, str | list[str]]) -> Profile:
    """Build a layout's profile; `ProfileError` names the key it could not use."""
    base_name = mapping.get("extends")
    if base_name is None:
        scalars: dict[str, tuple[str, ...]] = {}
        histograms: dict[str, tuple[str, ...]] = {}
    elif isinstance(base_name, str) and base_name in BUNDLED_PROFILES:
        base = BUNDLED_PROFILES[base_name]
        scalars, histograms = dict(base.scalars), dict(base.histograms)
    else:
        raise ProfileError(
            f"{name}.extends", f"unknown profile {base_name!r} (bundled: {', '.join(BUNDLED_PROFILES)})"
        )
    fields = set(_SCALAR_FIELDS.values())
    for key, value in mapping.items():
        if key == "extends":
            continue
        where = f"{name}.{key}"
        if key in _SCALAR_FIELDS or key in fields:
            scalars[_SCALAR_FIELDS.get(key, key)] = _names(value, where)
        elif key in _HISTOGRAMS:
            histograms[key] = _names(value, where)
        elif key.endswith(("_sum", "_count")) and key.rsplit("_", 1)[0] in _HISTOGRAMS:
            # a histogram given by its sum / count series: keep the base name
            names = _names(value, where)
            suffix = "_" + key.rsplit("_", 1)[1]
            if not all(n.endswith(suffix) for n in names):
                raise ProfileError(where, f"metric names must end in {suffix}")
            histograms[key.rsplit("_", 1)[0]] = tuple(n.removesuffix(suffix) for n in names)
        else:
            known = sorted([*_SCALAR_FIELDS, *_HISTOGRAMS, "extends"])
            raise ProfileError(where, f"unknown canonical field (known: {', '.join(known)})")
    if base_name is None:
        return Profile(name=name, scalars=scalars, histograms=histograms)
    base = BUNDLED_PROFILES[str(base_name)]
    # a field the layout renamed keeps no filter meant for the bundled name
    kept = {f: flt for f, flt in base.field_filters.items() if scalars.get(f) == base.scalars.get(f)}
    return Profile(
        name=name, scalars=scalars, histograms=histograms, series_filters=base.series_filters,
        field_filters=kept, replica_labels=base.replica_labels,
    )


def resolve_profile(name: str, custom_profiles: CustomProfiles | None = None) -> Profile:
    """A layout's own profile of that name, else a bundled one; `ProfileError` if neither."""
    if custom_profiles and name in custom_profiles:
        return custom_profile(name, custom_profiles[name])
    if name in BUNDLED_PROFILES:
        return BUNDLED_PROFILES[name]
    known = sorted({*BUNDLED_PROFILES, *(custom_profiles or {})})
    raise ProfileError(name, f"unknown engine profile {name!r} (known: {', '.join(known)})")


Series = Sequence[tuple[dict[str, str], float]]


def _aggregate(values: Sequence[float], how: Aggregate) -> float | None:
    if not values:
        return None
    return sum(values) if how == "sum" else sum(values) / len(values)


def _counted(series: Series, keep: Mapping[str, frozenset[str]] | None, replicas: Sequence[str]) -> Series:
    """The series a figure counts: those `keep` admits, one per set of replicas."""
    if keep:
        series = [(labels, value) for labels, value in series
                  if all(labels.get(label, "") in allowed for label, allowed in keep.items())]
    if not replicas or not any(r in labels for labels, _ in series for r in replicas):
        return series
    kept: dict[frozenset[tuple[str, str]], tuple[dict[str, str], float]] = {}
    for labels, value in series:
        key = frozenset((k, v) for k, v in labels.items() if k not in replicas)
        seen = kept.get(key)
        # copies are equal; where they are not (pipeline stages), the one that saw the work
        if seen is None or value > seen[1]:
            kept[key] = (labels, value)
    return list(kept.values())


def _engine_key(labels: Mapping[str, str]) -> tuple[str | None, ...]:
    return tuple(labels.get(label) for label in ENGINE_LABELS)


def _per_engine(series: Series) -> dict[str, float]:
    """The series of each DP engine summed, by engine ("engine=3", "dp_rank=1", "-")."""
    per_engine: dict[str, float] = {}
    for labels, value in series:
        key = ",".join(f"{k}={v}" for k, v in zip(ENGINE_LABELS, _engine_key(labels), strict=True)
                       if v is not None) or "-"
        per_engine[key] = per_engine.get(key, 0.0) + value
    return per_engine


def _verify_weighted(gauge: Series, lengths: Series, verify: Series) -> float | None:
    """A speculative gauge averaged over engines, weighted by verify calls.

    Only engines that report a length (SGLang writes 0 before its first decode log, and
    with speculative decoding off) count. Each engine's weight is the verify calls of
    the verify series whose labels agree with its own on every label both carry
    (`priority` aside: SGLang fills it per request); SGLang counts verify calls per
    server (no `dp_rank`), so the DP engines of one server weigh the same.
    """
    if not verify or sum(v for _, v in verify) <= 0:
        return None  # speculative decoding off, or no request verified yet
    active = {frozenset(labels.items()) for labels, value in lengths if value > 0}
    total = weights = 0.0
    for labels, value in gauge:
        if frozenset(labels.items()) not in active:
            continue
        weight = sum(
            v for vlabels, v in verify
            if all(labels[k] == vlabels[k] for k in vlabels.keys() & labels.keys() if k != "priority")
        )
        total += weight * value
        weights += weight
    return total / weights if weights > 0 else None


def counters_started_at(index: Exposition, profile: Profile) -> float | None:
    """When the engine's token counters began (unix seconds), or None when the page does
    not say. The earliest `_created` of the output-token counter's series is when it began
    (a series made later counted only since); the process start is a bound below that:
    a counter cannot begin before its process. The later of the two is the sharper."""
    known: list[float] = []
    created = index.first_present(profile.birth_names()[:-1])
    if created is not None:
        known.append(min(v for _, v in index.series(created)))
    started = index.series(PROCESS_START)
    if started:
        known.append(min(v for _, v in started))
    return max(known) if known else None


def engine_sample_from_exposition(
    index: Exposition, profile: Profile, source: EngineSourceKind = "endpoint", where: str = "engine",
    *, ranks: bool = True,
) -> EngineSample:
    """Canonical figures from parsed text. `ExpositionError` if none of the profile's
    metrics is present (a wrong URL or a wrong profile should say so, not show blanks)."""
    values: dict[str, float | None] = {}
    counted: dict[str, Series] = {}
    engine_steps: dict[str, float] | None = None
    for field_name, names in profile.scalars.items():
        found = index.first_present(names)
        if found is None:
            continue
        series = _counted(index.series(found), profile.filter_for(field_name, found), profile.replica_labels)
        counted[field_name] = series
        if field_name == _SPEC_WEIGHT_FIELD or field_name in _SPEC_GAUGE_FIELDS:
            continue
        if field_name == "steps_total":
            per_engine = _per_engine(series)
            values[field_name] = _aggregate(list(per_engine.values()), "mean")
            engine_steps = per_engine or None
            continue
        how: Aggregate = "mean" if field_name in _MEAN_FIELDS else "sum"
        values[field_name] = _aggregate([v for _, v in series], how)
    for field_name in _SPEC_GAUGE_FIELDS & counted.keys():
        values[field_name] = _verify_weighted(
            counted[field_name], counted.get("spec_accept_length", []), counted.get(_SPEC_WEIGHT_FIELD, [])
        )
    for hist, bases in profile.histograms.items():
        # sum and count from the same base name, never one old and one new
        base = index.first_present(f"{b}_count" for b in bases)
        if base is None:
            continue
        base = base.removesuffix("_count")
        sum_field, count_field = _HISTOGRAMS[hist]
        values[count_field] = _aggregate([v for _, v in index.series(f"{base}_count")], "sum")
        values[sum_field] = _aggregate([v for _, v in index.series(f"{base}_sum")], "sum")
    if not any(v is not None for v in values.values()):
        raise ExpositionError(f"no {profile.name} engine metrics in {redact_url(where)}")
    values["counters_started_at"] = counters_started_at(index, profile)
    extras = scoreboard_fields(index)
    per_position = index.first_present(PER_POSITION_NAMES)
    if per_position is not None:
        extras["accepted_tokens_by_position_total"] = accepted_by_position(index.series(per_position))
    if ranks:
        extras["ranks"] = engine_ranks(
            index, profile.wanted, lambda part: _rank_sample(part, profile, source, where))
    extras.update(engine_info_fields(index))
    return EngineSample(
        source=source, profile=profile.name, steps_by_engine_total=engine_steps,
        **values, **extras,  # type: ignore[arg-type]
    )


def _rank_sample(
    part: Exposition, profile: Profile, source: EngineSourceKind, where: str
) -> EngineSample | None:
    """One rank's series read by the node's own code (None: nothing the profile counts)."""
    try:
        return engine_sample_from_exposition(part, profile, source, where, ranks=False)
    except ExpositionError:
        return None


def engine_sample_from_text(
    text: str,
    profile: str,
    custom_profiles: CustomProfiles | None = None,
    source: EngineSourceKind = "endpoint",
    where: str = "engine endpoint",
) -> EngineSample:
    """Engine exposition text → `EngineSample`. Raises `ExpositionError` on garbage (and
    `ProfileError`, also a ValueError, on an unknown or malformed profile)."""
    return engine_reading_from_text(text, profile, custom_profiles, source, where)[0]


def engine_reading_from_text(
    text: str,
    profile: str,
    custom_profiles: CustomProfiles | None = None,
    source: EngineSourceKind = "endpoint",
    where: str = "engine endpoint",
) -> tuple[EngineSample, list[str]]:
    """`engine_sample_from_text`, with the notes the page deserves (duplicate series)."""
    resolved = resolve_profile(profile, custom_profiles)
    index = parse_exposition(text, where, wanted=resolved.wanted)
    note = duplicate_note(index, where)
    return engine_sample_from_exposition(index, resolved, source, where), [note] if note else []
