"""The `prom` source's per-rank engines: each data-parallel engine of a node on its own.

The engine tier's figures are folded per node on the server (collectors/sources/promql.py); the
same figures are also asked for per engine — grouped by the node and vLLM's `engine` /
SGLang's `dp_rank` labels (`collectors.pages.engine_ranks.RANK_LABELS`) — and handed here, as
`"rank:<field>"` results keyed by those labels' values. Each rank becomes an
`EngineRankSample` carrying the figures the endpoint source gives a rank read alone from
its page (collectors/pages/engine_ranks.py): counters raw and cumulative, gauges as read, its
latency histograms' cumulative buckets. A series with neither label is the node's alone.

Not from Prometheus: SGLang's `tp_rank` under a `dp_rank` (the copies are merged on the
server), so a rank's GPUs come from the layout's tensor-parallel size here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from infertop.collectors.pages.draft_positions import POSITION_FIELD, POSITION_LABEL, accepted_by_position
from infertop.collectors.pages.engine_ranks import MAX_RANKS, RANK_LABELS, dp_rank_of, rank_key, rank_order
from infertop.collectors.sample import (
    ENGINE_COUNTER_FIELDS,
    ENGINE_GAUGE_FIELDS,
    EngineRankSample,
    EngineSample,
)

RANK_KEY = "rank:"  # a per-rank query's key: "rank:generation_tokens_total", "rank:latency:itl"
_FIELDS = frozenset((*ENGINE_COUNTER_FIELDS, *ENGINE_GAUGE_FIELDS))

Figures = Mapping[str, Mapping[tuple[str, ...], float | None]]
Buckets = Callable[[Mapping[tuple[str, ...], float | None]], tuple[tuple[float, float], ...] | None]


def rank_subkeys(key: str, latency_key: str) -> tuple[str, ...] | None:
    """The labels a per-rank result is keyed by; None for a key that is not per rank."""
    if not key.startswith(RANK_KEY):
        return None
    return (*RANK_LABELS, "le") if key[len(RANK_KEY):].startswith(latency_key) else RANK_LABELS


def rank_samples(fig: Figures, steps_by_engine: str, latency_key: str, buckets: Buckets,
                 scalars: Mapping[str, Any]) -> list[EngineRankSample] | None:
    """The node's ranks from its per-rank results (`steps_by_engine`: the per-engine steps
    the node's query already asks for, keyed by the same labels); None when no series
    carries a rank label."""
    per: dict[tuple[str, ...], dict[str, float | None]] = {}
    hists: dict[tuple[str, ...], dict[str, dict[tuple[str, ...], float | None]]] = {}
    positions: dict[tuple[str, ...], list[tuple[dict[str, str], float]]] = {}
    for key, by_sub in fig.items():
        if key.startswith(RANK_KEY):
            field = key[len(RANK_KEY):]
            if field == POSITION_FIELD:
                for (*rank, position), count in by_sub.items():
                    if count is not None:
                        positions.setdefault(tuple(rank), []).append(({POSITION_LABEL: position}, count))
            elif field.startswith(latency_key):
                name = field[len(latency_key):]
                for (*rank, le), count in by_sub.items():
                    hists.setdefault(tuple(rank), {}).setdefault(name, {})[(le,)] = count
            elif field in _FIELDS or field in scalars:
                for sub, value in by_sub.items():
                    per.setdefault(sub, {})[field] = value
        elif key == steps_by_engine:
            for sub, value in by_sub.items():
                per.setdefault(sub, {})["steps_total"] = value
    labelled = {sub for sub in (*per, *hists, *positions) if any(sub)}
    found: dict[str, EngineRankSample] = {}
    for sub in labelled:
        values = {k: v for k, v in per.get(sub, {}).items() if v is not None and math.isfinite(v)}
        latency = {name: b for name, by_le in hists.get(sub, {}).items() if (b := buckets(by_le)) is not None}
        if not values and not latency and sub not in positions:
            continue
        named = rank_key({label: v for label, v in zip(RANK_LABELS, sub, strict=True) if v})
        if named is None or named in found or len(found) >= MAX_RANKS:
            continue
        steps = values.get("steps_total")
        engine = EngineSample(
            source="endpoint", profile="prom",
            steps_by_engine_total={named: steps} if steps is not None else None,
            latency_buckets=latency or None, **values,
            accepted_tokens_by_position_total=accepted_by_position(positions.get(sub, ())),
        )
        found[named] = EngineRankSample(key=named, dp_rank=dp_rank_of(named), engine=engine)
    return [found[k] for k in sorted(found, key=rank_order)] or None
