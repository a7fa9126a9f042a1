"""Scoreboard roll-ups: a pool's latency, cache and live throughput point. Pure.

A pool's percentile is taken from the sum of its nodes' bucket increases over the window
(every request the pool served), never as a mean of the nodes' percentiles. Its hit rate
weights each node by the tokens it looked up; its tokens per GPU and per user divide the
pool's accepted tokens/s by the pool's GPUs and by its mean running requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infertop.collectors.rates import ratio, total
from infertop.monitor.evaluation.goodput import attainment_fields, goodput, share_bounds, share_fields
from infertop.monitor.evaluation.latency import LATENCIES, PERCENTILES, LatencyWindow, merge, percentile
from infertop.monitor.snapshot import ClusterView, NodeView, RollupView, SessionView

# the whole cluster's goodput now (monitor/evaluation/goodput.py), the session's too
GOODPUT_FIELDS = (
    "goodput_share_low", "goodput_share_high", "goodput_note", "usd_per_million_good_tokens_low",
    "usd_per_million_good_tokens_high",
)
# the pool whose point is compared with the decode reference points, in order of choice
LIVE_POINT_ROLES = ("decode", "mixed")
# SessionView fields that come from the roll-ups, not from the ledger
LIVE_POINT_FIELDS = (
    "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
    "full_acceptance_tokens_per_s_per_gpu", "live_point_pool", "ttft_pool", "itl_pool",
    *GOODPUT_FIELDS,
)
# where a disaggregated cluster makes its first tokens; asked before the live pool
FIRST_TOKEN_ROLES = ("prefill",)


def latency_figures(windows: Mapping[str, tuple[tuple[float, float], ...] | None]) -> dict[str, Any]:
    """`<name>_p50_s` … with their bucket bounds and counts, from bucket increases."""
    out: dict[str, Any] = {}
    bounds: dict[str, tuple[float, float | None]] = {}
    counts: dict[str, float] = {}
    for name in LATENCIES:
        buckets = windows.get(name)
        if not buckets:
            continue
        counts[name] = buckets[-1][1]
        for label, q in PERCENTILES:
            p = percentile(buckets, q)
            if p is not None:
                out[f"{name}_{label}_s"] = p.value_s
                bounds[f"{name}_{label}"] = (p.lower_s, p.upper_s)
    out["latency_bounds_s"] = bounds
    out["latency_requests"] = counts
    return out


def slo_attainment(
    windows: Mapping[str, tuple[tuple[float, float], ...] | None],
    ttft_target_s: float | None, itl_target_s: float | None,
) -> dict[str, float | None]:
    """Share of the window's requests (tokens, for ITL) within each target, as the bounds
    goodput uses (`goodput.share_bounds`): at least / at most, never a point inside a bucket."""
    out: dict[str, float | None] = {}
    for name, target in (("ttft", ttft_target_s), ("itl", itl_target_s)):
        buckets = windows.get(name)
        out |= attainment_fields(name, None if target is None else share_bounds(buckets, target))
    return out


def pool_windows(nodes: Sequence[NodeView], latency_windows: Mapping[str, LatencyWindow]) -> LatencyWindow:
    """The pool's window: its nodes' bucket increases summed, latency by latency."""
    windows = [latency_windows[n.name] for n in nodes if n.name in latency_windows]
    out = {}
    for name in LATENCIES:
        merged = merge(w.get(name) for w in windows)
        if merged is not None:
            out[name] = merged
    return out


def gpus_at_work(declared: int | None, answering: int) -> int:
    """The GPUs a node's per-GPU figures divide by: those the layout declares, or more
    where more answer (a node declared `gpus = 0` whose 8 GPUs make tokens divides by 8:
    the tokens were made by GPUs, whatever the layout bills). The one rule for every
    per-GPU figure of a node and a pool."""
    return max(declared or 0, answering)


def gpu_count_note(declared: int | None, answering: int) -> str | None:
    """The finding when more GPUs answer than the layout declares (fewer is the GPU-error
    verdict's "6 of 8 visible")."""
    if declared is None or answering <= declared:
        return None
    return (f"{answering} GPUs answer where the layout declares {declared}: per-GPU figures "
            f"divide by {answering}; the bill counts the {declared} declared")


def pool_scoreboard(
    nodes: Sequence[NodeView], latency_windows: Mapping[str, LatencyWindow],
    ttft_target_s: float | None = None, itl_target_s: float | None = None,
) -> dict[str, Any]:
    """RollupView scoreboard fields for `nodes` (`latency_windows`: node name → its window)."""
    engines = [n.engine for n in nodes if n.engine is not None]
    windows = pool_windows(nodes, latency_windows)
    out = latency_figures(windows)
    out.update(slo_attainment(windows, ttft_target_s, itl_target_s))
    # hit rate pooled by the hits and lookups behind each node's rate: a node's rate alone
    # does not say how many tokens it looked up, so weight by its prompt tokens/s
    weighted = [
        (e.prefix_cache_hit_rate, e.prompt_tokens_per_s)
        for e in engines
        if e.prefix_cache_hit_rate is not None and e.prompt_tokens_per_s
    ]
    weight = sum(w for _, w in weighted)
    out["prefix_cache_hit_rate"] = (
        sum(r * w for r, w in weighted) / weight if weight > 0 else None
    )
    out.update(share_fields(goodput(windows.get("ttft"), windows.get("itl"), ttft_target_s, itl_target_s)))
    out["preemptions_per_s"] = total(e.preemptions_per_s for e in engines)
    out["kv_transfer_bytes_per_s"] = total(e.kv_transfer_bytes_per_s for e in engines)
    gpus = sum(gpus_at_work(n.gpus_expected, len(n.gpus)) for n in nodes)
    tokens = total(e.accepted_tokens_per_s for e in engines)
    full = total(e.full_acceptance_tokens_per_s for e in engines)
    out["output_tokens_per_s_per_gpu"] = tokens / gpus if tokens is not None and gpus else None
    out["full_acceptance_tokens_per_s_per_gpu"] = full / gpus if full is not None and gpus else None
    # per user: only nodes that know both figures, so a node without a running gauge does
    # not inflate the pool's tokens per request
    both = [e for e in engines if e.accepted_tokens_per_s is not None and e.requests_running_mean is not None]
    out["output_tokens_per_s_per_user"] = ratio(
        total(e.accepted_tokens_per_s for e in both), total(e.requests_running_mean for e in both)
    )
    return out


def live_pool(cluster: ClusterView) -> tuple[str, RollupView] | None:
    """The pool whose live point the scoreboard compares: decode, else mixed, else all."""
    for role in LIVE_POINT_ROLES:
        pool = cluster.roles.get(role)
        if pool is not None and pool.accepted_tokens_per_s is not None:
            return role, pool
    if cluster.total.accepted_tokens_per_s is not None:
        return "all", cluster.total
    return None


def latency_pool(cluster: ClusterView, latency: str, roles: Sequence[str]) -> str | None:
    """The first of `roles` whose pool has a p99 for `latency` ("ttft", "itl"), else
    "all" when the cluster's total has one. On a disaggregated cluster the decode pool
    observes no first tokens: its TTFT is unknown, the prefill pool's is the figure."""
    for role in (*roles, "all"):
        pool = cluster.pool(role)
        if pool is not None and getattr(pool, f"{latency}_p99_s") is not None:
            return role
    return None


def with_live_point(session: SessionView, cluster: ClusterView) -> SessionView:
    """The session's `output_tokens_per_s_per_gpu` / `_per_user`: the decode pool's point;
    and the pools its TTFT and ITL are read from."""
    found = live_pool(cluster)
    live_roles = (found[0],) if found is not None else LIVE_POINT_ROLES
    update: dict[str, Any] = {
        "ttft_pool": latency_pool(cluster, "ttft", (*FIRST_TOKEN_ROLES, *live_roles)),
        "itl_pool": latency_pool(cluster, "itl", live_roles),
    }
    if found is not None:
        role, pool = found
        update |= {
            "output_tokens_per_s_per_gpu": pool.output_tokens_per_s_per_gpu,
            "output_tokens_per_s_per_user": pool.output_tokens_per_s_per_user,
            "full_acceptance_tokens_per_s_per_gpu": pool.full_acceptance_tokens_per_s_per_gpu,
            "live_point_pool": role,
        }
    # goodput and the cost of a good token now: the whole cluster's (every request, its $/h)
    update |= {f: getattr(cluster.total, f) for f in GOODPUT_FIELDS}
    return session.model_copy(update=update)
