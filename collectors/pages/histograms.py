"""Scoreboard figures read from an engine page: latency histograms (cumulative `le`
buckets), prefix-cache, preemption and KV-transfer counters, EPLB balancedness.

Names are engine-prefixed (`vllm:` / `sglang:`), so one table serves every profile: a
page holds one engine's names, and the first present name of each entry wins.

A node runs several engines (vLLM's `engine` label, SGLang's `dp_rank` / `tp_rank`,
SGLang's `is_streaming` on TTFT): the buckets of every series with the same `le` bound
are summed, which is the histogram of all the node's requests together. Counters are
summed the same way. What comes out is cumulative, as read; the window's deltas and the
percentiles are taken by `monitor.evaluation.latency`.

Upstream names and bucket sets: vLLM `vllm/v1/metrics/loggers.py` (TTFT 0.001…2560 s,
ITL 0.01/0.025/0.05/0.075/0.1…80 s, e2e and queue 0.3…7680 s) and NIXL
`vllm:nixl_*` from its KV connector stats; SGLang
`python/sglang/srt/observability/metrics_collector.py` (TTFT 0.1…400 s, ITL
0.002…8 s), `sglang:kv_transfer_*` (PD disaggregation), `sglang:eplb_balancedness`
(`SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC` / expert-distribution metrics).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping

from infertop.collectors.pages.exposition import Exposition

# canonical latency → histogram base names, newest name first
LATENCY_HISTOGRAMS: Mapping[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    # NIXL's time per KV transfer (vLLM 0.33 KV connector stats): the P→D path's percentiles
    "kv_transfer": ("vllm:nixl_xfer_time_seconds",),
}

# EngineSample field → (sample names, first present wins; factor to the field's unit)
SCOREBOARD_SCALARS: Mapping[str, tuple[tuple[str, ...], float]] = {
    "preemptions_total": ((
        "vllm:num_preemptions_total",
        "sglang:num_retracted_requests_total",
        "sglang:num_retracted_reqs_total",
    ), 1.0),
    "prefix_cache_queries_total": (("vllm:prefix_cache_queries_total",), 1.0),
    "prefix_cache_hits_total": (("vllm:prefix_cache_hits_total",), 1.0),
    # KV loaded through a connector (LMCache, NIXL from a prefill node), vLLM only
    "external_prefix_cache_queries_total": (("vllm:external_prefix_cache_queries_total",), 1.0),
    "external_prefix_cache_hits_total": (("vllm:external_prefix_cache_hits_total",), 1.0),
    # NIXL's bytes are a histogram of bytes per transfer: its _sum counts every byte;
    # SGLang's transfer size histogram is in MB
    "kv_transfer_bytes_total": ((
        "vllm:nixl_bytes_transferred_sum",
    ), 1.0),
    "kv_transfer_failures_total": ((
        "vllm:nixl_num_failed_transfers_total",
        "sglang:num_transfer_failed_reqs_total",
    ), 1.0),
    "kv_transfer_seconds_sum": (("vllm:nixl_xfer_time_seconds_sum",), 1.0),
    # requests whose KV expired before the decode node read it (counted on the prefill node)
    "kv_transfer_expired_total": (("vllm:nixl_num_kv_expired_reqs_total",), 1.0),
    "kv_transfer_seconds_count": (("vllm:nixl_xfer_time_seconds_count",), 1.0),
    "expert_balancedness_sum": (("sglang:eplb_balancedness_sum",), 1.0),
    "expert_balancedness_count": (("sglang:eplb_balancedness_count",), 1.0),
}
# SGLang: MB transferred (a histogram's _sum), read when no byte counter is present
_SGLANG_KV_MB_SUM = "sglang:kv_transfer_total_mb_sum"
# SGLang gauges: the latest transfer's speed and latency (written per log interval)
SCOREBOARD_GAUGES: Mapping[str, tuple[str, float]] = {
    "kv_transfer_speed_bytes_per_s": ("sglang:kv_transfer_speed_gb_s", 1e9),
    "kv_transfer_latency_s": ("sglang:kv_transfer_latency_ms", 1e-3),
}

Buckets = tuple[tuple[float, float], ...]  # (upper bound `le`, cumulative count), +inf last


# the bucket series of every latency histogram: most of a vLLM page's wanted lines (856 of
# 1,044 with 8 engines), so the scrape source reads them on some rounds only
LATENCY_BUCKET_NAMES = frozenset(f"{b}_bucket" for bases in LATENCY_HISTOGRAMS.values() for b in bases)


@functools.cache
def wanted_names() -> frozenset[str]:
    """Every sample name read here, for `parse_exposition(wanted=…)` (built once)."""
    names = set(LATENCY_BUCKET_NAMES)
    names |= {n for names_, _ in SCOREBOARD_SCALARS.values() for n in names_}
    names |= {n for n, _ in SCOREBOARD_GAUGES.values()}
    names.add(_SGLANG_KV_MB_SUM)
    return frozenset(names)


# A page writes the same few bound texts ("0.005", "+Inf") for every engine and every
# histogram, round after round: each text is converted once, and every sample shares its
# float (the prom source's answers too, collectors/sources/promql.py: ~24 bytes a bucket a sample).
# Bounded, as the texts come from the page.
@functools.lru_cache(maxsize=1024)
def bucket_bound(raw: str) -> float | None:
    """A bucket's `le` text → its bound; None when not a number (NaN included)."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def summed_buckets(index: Exposition, base: str) -> Buckets | None:
    """The `<base>_bucket` series summed by `le` across engines, sorted, +Inf last; None
    when absent or not a histogram (no +Inf bucket, a count that goes down with `le`)."""
    by_le: dict[float, float] = {}
    get = by_le.get
    for labels, value in index.series(f"{base}_bucket"):
        raw = labels.get("le")
        le = None if raw is None else bucket_bound(raw)
        if le is None or value < 0:
            return None
        by_le[le] = get(le, 0.0) + value
    if not by_le or math.inf not in by_le:
        return None
    buckets = tuple(sorted(by_le.items()))
    if any(b[1] < a[1] for a, b in itertools.pairwise(buckets)):
        return None  # cumulative buckets never go down with le: not a histogram
    return buckets


def latency_histograms(index: Exposition) -> dict[str, Buckets]:
    """Canonical latency name → summed cumulative buckets, for those the page has."""
    out: dict[str, Buckets] = {}
    for name, bases in LATENCY_HISTOGRAMS.items():
        found = index.first_present(f"{b}_bucket" for b in bases)
        if found is None:
            continue
        buckets = summed_buckets(index, found.removesuffix("_bucket"))
        if buckets is not None:
            out[name] = buckets
    return out


def scoreboard_fields(index: Exposition) -> dict[str, object]:
    """EngineSample fields for the scoreboard, those the page has (nothing else)."""
    values: dict[str, object] = {}
    for field, (names, factor) in SCOREBOARD_SCALARS.items():
        found = index.first_present(names)
        if found is not None:
            values[field] = sum(v for _, v in index.series(found)) * factor
    if "kv_transfer_bytes_total" not in values and index.series(_SGLANG_KV_MB_SUM):
        values["kv_transfer_bytes_total"] = sum(v for _, v in index.series(_SGLANG_KV_MB_SUM)) * 1e6
    for field, (name, factor) in SCOREBOARD_GAUGES.items():
        series = index.series(name)
        if series:
            # the node's engines transfer side by side: speeds add, latency is their mean
            total = sum(v for _, v in series)
            values[field] = (total if field.endswith("per_s") else total / len(series)) * factor
    histograms = latency_histograms(index)
    if histograms:
        values["latency_buckets"] = histograms
    return values
