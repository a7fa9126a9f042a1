"""Engine profiles: which metric names hold each canonical engine quantity.

Bundled: `vllm` (V1 names, older names accepted after them), `sglang`, and `deepinfer`
(DeepInfer is built on vLLM, so it reads vLLM names unless the layout says otherwise).
A layout may add its own under ``[profiles.<name>]``: canonical field → metric name or
list of names (first present wins), optionally ``extends = "vllm"`` to start from a
bundled profile. Keys are the canonical names of DESIGN.md (``steps``, ``drafts``, …,
``ttft_seconds`` / ``itl_seconds`` for histograms, by base name) or the `EngineSample`
field names (``steps_total``, ``ttft_seconds_sum``, …).

How several series of one metric (vLLM's `engine` label per data-parallel engine,
SGLang's `tp_rank` / `dp_rank`, `finished_reason`, …) become one figure:
- counters and the running / waiting gauges are summed — each series counts its own
  requests and tokens;
- `steps_total` is summed within each data-parallel engine (series told apart by
  `ENGINE_LABELS`; SGLang splits its pass counter by a `mode` label) and then *averaged*
  over engines: in wide expert parallelism every DP engine steps in lockstep with its
  peers, so the node's decode steps/s is one engine's rate, not the sum (which would
  grow with the number of engines);
- `kv_cache_usage` is the mean (each engine has its own KV pool of the same size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from collectors.exposition import Exposition, ExpositionError, duplicate_note, parse_exposition
from collectors.histograms import scoreboard_fields, wanted_names
from collectors.safe_text import redact_url
from collectors.sample import EngineSample, EngineSourceKind

CustomProfiles = Mapping[str, Mapping[str, str | list[str]]]
Aggregate = Literal["sum", "mean"]

# canonical short name (DESIGN.md) → EngineSample field, for scalar quantities
_SCALAR_FIELDS: dict[str, str] = {
    "steps": "steps_total",
    "drafts": "drafts_total",
    "draft_tokens": "draft_tokens_total",
    "accepted_tokens": "accepted_tokens_total",
    "generation_tokens": "generation_tokens_total",
    "prompt_tokens": "prompt_tokens_total",
    "prompt_cached_tokens": "prompt_cached_tokens_total",
    "requests_finished": "requests_finished_total",
    "requests_running": "requests_running",
    "requests_waiting": "requests_waiting",
    "kv_cache_usage": "kv_cache_usage",
}
# histogram short name → (EngineSample sum field, count field)
_HISTOGRAMS: dict[str, tuple[str, str]] = {
    "ttft_seconds": ("ttft_seconds_sum", "ttft_seconds_count"),
    "itl_seconds": ("itl_seconds_sum", "itl_seconds_count"),
}
_MEAN_FIELDS = frozenset({"kv_cache_usage"})
# labels that tell one data-parallel engine from another (vLLM, SGLang)
ENGINE_LABELS: tuple[str, ...] = ("engine", "dp_rank")


@dataclass(frozen=True)
class Profile:
    """Metric names per canonical quantity; in each tuple the first present name wins."""

    name: str
    scalars: Mapping[str, tuple[str, ...]]  # EngineSample field → metric sample names
    histograms: Mapping[str, tuple[str, ...]]  # "ttft_seconds" / "itl_seconds" → base names

    def metric_names(self) -> list[str]:
        """Every sample name this profile may read (for PromQL and for filtering)."""
        out = [n for names in self.scalars.values() for n in names]
        out += [f"{b}{suffix}" for bases in self.histograms.values() for b in bases
                for suffix in ("_sum", "_count")]
        return out

    @property
    def wanted(self) -> frozenset[str]:
        """`metric_names` as a set, for `parse_exposition(wanted=…)`, with the
        scoreboard's names (`collectors.histograms`: engine-prefixed, read on any profile)."""
        return frozenset(self.metric_names()) | wanted_names()


class ProfileError(ValueError):
    """A custom profile the layout got wrong; `field` is its path under `profiles`."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


_VLLM = Profile(
    name="vllm",
    scalars={
        # vLLM has no step counter: each engine step observes the histogram once
        "steps_total": ("vllm:iteration_tokens_total_count",),
        "drafts_total": ("vllm:spec_decode_num_drafts_total",),
        "draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
        "accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
        "generation_tokens_total": ("vllm:generation_tokens_total",),
        "prompt_tokens_total": ("vllm:prompt_tokens_total",),
        "prompt_cached_tokens_total": ("vllm:prefix_cache_hits_total",),
        "requests_finished_total": ("vllm:request_success_total",),
        "requests_running": ("vllm:num_requests_running",),
        "requests_waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    histograms={
        "ttft_seconds": ("vllm:time_to_first_token_seconds",),
        "itl_seconds": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    },
)

_SGLANG = Profile(
    name="sglang",
    scalars={
        # forward passes by CUDA-graph mode (recent builds only); older builds: unknown
        "steps_total": ("sglang:cuda_graph_passes_total",),
        # SGLang exposes speculative decoding only as gauges written every 40 batches
        # (spec_accept_rate / _length): stale between logs, so not read as figures
        "generation_tokens_total": ("sglang:generation_tokens_total",),
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "prompt_cached_tokens_total": ("sglang:cached_tokens_total",),
        "requests_finished_total": ("sglang:num_requests_total",),
        "requests_running": ("sglang:num_running_reqs",),
        "requests_waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
    },
    histograms={
        "ttft_seconds": ("sglang:time_to_first_token_seconds",),
        "itl_seconds": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    },
)

BUNDLED_PROFILES: dict[str, Profile] = {
    "vllm": _VLLM,
    "sglang": _SGLANG,
    "deepinfer": Profile(name="deepinfer", scalars=_VLLM.scalars, histograms=_VLLM.histograms),
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
    return Profile(name=name, scalars=scalars, histograms=histograms)


def resolve_profile(name: str, custom_profiles: CustomProfiles | None = None) -> Profile:
    """A layout's own profile of that name, else a bundled one; `ProfileError` if neither."""
    if custom_profiles and name in custom_profiles:
        return custom_profile(name, custom_profiles[name])
    if name in BUNDLED_PROFILES:
        return BUNDLED_PROFILES[name]
    known = sorted({*BUNDLED_PROFILES, *(custom_profiles or {})})
    raise ProfileError(name, f"unknown engine profile {name!r} (known: {', '.join(known)})")


def _aggregate(values: Sequence[float], how: Aggregate) -> float | None:
    if not values:
        return None
    return sum(values) if how == "sum" else sum(values) / len(values)


def _per_engine_mean(series: Sequence[tuple[dict[str, str], float]]) -> float | None:
    """Sum the series of each DP engine, then average over engines."""
    per_engine: dict[tuple[str | None, ...], float] = {}
    for labels, value in series:
        key = tuple(labels.get(label) for label in ENGINE_LABELS)
        per_engine[key] = per_engine.get(key, 0.0) + value
    return _aggregate(list(per_engine.values()), "mean")


def engine_sample_from_exposition(
    index: Exposition, profile: Profile, source: EngineSourceKind = "endpoint", where: str = "engine"
) -> EngineSample:
    """Canonical figures from parsed text. `ExpositionError` if none of the profile's
    metrics is present (a wrong URL or a wrong profile should say so, not show blanks)."""
    values: dict[str, float | None] = {}
    for field, names in profile.scalars.items():
        found = index.first_present(names)
        if found is None:
            continue
        if field == "steps_total":
            values[field] = _per_engine_mean(index.series(found))
            continue
        how: Aggregate = "mean" if field in _MEAN_FIELDS else "sum"
        values[field] = _aggregate([v for _, v in index.series(found)], how)
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
    extras = scoreboard_fields(index)
    return EngineSample(source=source, profile=profile.name, **values, **extras)  # type: ignore[arg-type]


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
