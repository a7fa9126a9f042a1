"""An engine's settings and health, read from its info and health gauges.

vLLM exports its cache configuration as an info gauge: `vllm:cache_config_info` (vLLM
0.33 `vllm/v1/metrics/loggers.py`, `PrometheusStatLogger.log_metrics_info`), a gauge
held at 1 whose labels are `CacheConfig.metrics_info()` — every setting as a string
(`block_size`, `cache_dtype`, `gpu_memory_utilization`, `enable_prefix_caching`,
`num_gpu_blocks`, …) — plus `engine`, one series per data-parallel engine. Settings are
named `<config>.<label>` ("cache.block_size"), so other info gauges fit beside it.

`vllm:engine_healthy` (1 healthy, 0 not), where a build serves it, is the engine's own
word on its health: a node is unhealthy when any of its engines says so.

The labels are the page's text: bounded here (count, key and value length), terminal
controls made visible escapes (`inert_text`); viewers draw them as plain text, never markup.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping

from infertop.collectors.pages.exposition import Exposition
from infertop.collectors.safe_text import inert_text

# info gauge → the prefix its settings are named with
INFO_GAUGES: Mapping[str, str] = {
    "vllm:cache_config_info": "cache",
}
# settings an engine serves as a gauge's value, not as labels: SGLang 0.5.23 sets these once
# at start-up (`SchedulerMetricsCollector.emit_constants`, srt/observability/metrics_collector.py)
VALUE_SETTINGS: Mapping[str, str] = {
    "sglang:page_size": "sglang.page_size",
    "sglang:context_len": "sglang.context_len",
    "sglang:max_total_num_tokens": "sglang.max_total_num_tokens",
}
HEALTH_GAUGES: tuple[str, ...] = ("vllm:engine_healthy",)
# labels that say which series, not which setting
_NOT_SETTINGS = frozenset({"engine", "model_name", "dp_rank", "tp_rank", "pp_rank", "__name__"})
MAX_SETTINGS = 64
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 120


def info_names() -> frozenset[str]:
    """The sample names read here, for `parse_exposition(wanted=…)`."""
    return frozenset([*INFO_GAUGES, *VALUE_SETTINGS, *HEALTH_GAUGES])


def bounded_value(value: str) -> str:
    """One bounded line, terminal controls shown as escapes (never obeyed)."""
    return inert_text(value, MAX_VALUE_CHARS)


def engine_settings(index: Exposition) -> dict[str, str] | None:
    """Setting name → value over the node's engines; None when no info gauge is served.
    Engines of one node that disagree (they should not) show every value: "16 | 32"."""
    from_labels = settings_from_labels(
        (INFO_GAUGES[name], labels) for name in INFO_GAUGES for labels, _value in index.series(name)
    )
    from_values = settings_from_values(
        (VALUE_SETTINGS[name], value) for name in VALUE_SETTINGS for _labels, value in index.series(name)
    )
    if from_labels is None and from_values is None:
        return None
    return dict(sorted({**(from_values or {}), **(from_labels or {})}.items())[:MAX_SETTINGS])


def setting_text(value: float) -> str:
    """A gauge's value as a setting: 64, not 64.0."""
    return str(int(value)) if value.is_integer() else f"{value:g}"


def settings_from_values(series: Iterable[tuple[str, float]]) -> dict[str, str] | None:
    """(setting name, gauge value) of each series → setting name → value; several ranks'
    copies that disagree show every value ("16 | 32"). NaN is unknown."""
    seen: dict[str, set[str]] = {}
    for key, value in series:
        if math.isfinite(value):
            values = seen.setdefault(key, set())
            if len(values) < 4:
                values.add(setting_text(value))
    return {key: " | ".join(sorted(values)) for key, values in sorted(seen.items())} or None


def settings_from_labels(
    series: Iterable[tuple[str, Mapping[str, str]]], not_settings: Container[str] = ()
) -> dict[str, str] | None:
    """(prefix, labels) of each info-gauge series → setting name → value; None when there
    is none. `not_settings`: more labels that say where a series came from (the prom
    source's target labels), not a setting."""
    seen: dict[str, set[str]] = {}
    for prefix, labels in series:
        for label, value in labels.items():
            if label in _NOT_SETTINGS or label in not_settings:
                continue
            key = inert_text(f"{prefix}.{label}", MAX_KEY_CHARS)
            if key not in seen and len(seen) >= MAX_SETTINGS:
                continue
            values = seen.setdefault(key, set())
            if len(values) < 4:
                values.add(bounded_value(value))
    if not seen:
        return None
    return {key: " | ".join(sorted(values)) for key, values in sorted(seen.items())}


def engine_healthy(index: Exposition) -> bool | None:
    """False when any engine says it is unhealthy, True when all say healthy, None when
    no health gauge is served (or its values are not numbers)."""
    found = index.first_present(HEALTH_GAUGES)
    if found is None:
        return None
    values = [v for _, v in index.series(found) if not math.isnan(v)]
    if not values:
        return None
    return all(v >= 1 for v in values)


def engine_info_fields(index: Exposition) -> dict[str, object]:
    """EngineSample fields from the info and health gauges, those the page has."""
    out: dict[str, object] = {}
    settings = engine_settings(index)
    if settings is not None:
        out["settings"] = settings
    healthy = engine_healthy(index)
    if healthy is not None:
        out["healthy"] = healthy
    return out
