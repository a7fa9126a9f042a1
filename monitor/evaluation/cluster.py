"""Fleet state + layout → node views and per-role roll-ups. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from infertop.collectors.bounds import counter_trust
from infertop.collectors.fleet import FleetState, NodeState
from infertop.collectors.process.loop_stalls import StallTimeline
from infertop.collectors.rates import mean, total
from infertop.collectors.sample import NodeSample
from infertop.layouts.model import Layout, NodeConfig, SloConfig
from infertop.monitor.evaluation.activity import idle_basis
from infertop.monitor.evaluation.conditions import BLIND
from infertop.monitor.evaluation.config_drift import with_config_drift
from infertop.monitor.evaluation.coverage import node_coverage
from infertop.monitor.evaluation.engine_ranks import rank_counters, rank_fields, tensor_parallel_size
from infertop.monitor.evaluation.figures import (
    doubt_notes,
    engine_counters,
    engine_fields,
    gpu_counters,
    gpu_views,
    host_view,
    idle_counts,
    idle_fraction,
    late_by_monitor,
    nic_counters,
    nic_views,
    node_status,
    part_window,
    per_gpu_and_user,
)
from infertop.monitor.evaluation.goodput import cost_fields
from infertop.monitor.evaluation.latency import LatencyWindow
from infertop.monitor.evaluation.link_summary import gpu_sums, links_view, nic_traffic
from infertop.monitor.evaluation.logs import log_silence_note
from infertop.monitor.evaluation.money import cluster_cost_per_hour_usd, node_cost_per_hour_usd
from infertop.monitor.evaluation.reference_points import reference_points
from infertop.monitor.evaluation.scoreboard import (
    gpu_count_note,
    gpus_at_work,
    pool_scoreboard,
    slo_attainment,
)
from infertop.monitor.evaluation.shared_gaps import mark_shared, shared_blind_spots
from infertop.monitor.evaluation.window_rates import Extract, RateCache, WindowRates
from infertop.monitor.snapshot import ClusterView, EngineView, NodeView, ReferencePointView, RollupView

SETTLE_SLACK = 0.9  # readings a hair under one interval apart (a poll's jitter) still count


def settle_span_s(interval_s: float) -> float:
    """How far apart a rate's first and last readings must be for it to be shown: one
    interval (less the jitter of a poll). Until then its figure is "—": settling."""
    return interval_s * SETTLE_SLACK


def gpus_trailing_s(gpu_samples: list[NodeSample], age_s: float | None, now: float,
                    interval_s: float) -> float | None:
    """The age of the node's newest per-GPU reading where it trails its newest reading by
    more than an interval (detail read on a rotation); None otherwise."""
    if not gpu_samples or age_s is None:
        return None
    gpus_age = now - gpu_samples[-1].taken_at
    return gpus_age if gpus_age - age_s > interval_s else None


class Evaluated(NamedTuple):
    """The fleet's node views, and beside them each node's latency window (node name →
    its engine's bucket increases over the window, `LatencyWindow`): the pools' and the
    P→D path's percentiles are made of them; the snapshot carries the views only."""

    nodes: list[NodeView]
    latency_windows: dict[str, LatencyWindow]


def node_engine(
    samples: Sequence[NodeSample],
    now: float,
    rates: WindowRates | None,
    gpus: int | None,
    tp: int | None,
    rank_rates: WindowRates | None,
    slo: SloConfig,
) -> tuple[EngineView | None, LatencyWindow]:
    """The node's engine view, built once from all its parts: its figures over the window,
    its live point per GPU and per user, its ranks, its shares within the SLO targets; and
    beside it the window's bucket increases they were made of."""
    made = engine_fields(samples, now, rates)
    if made is None:
        return None, {}
    fields, window = made
    fields.update(per_gpu_and_user(fields, gpus))
    fields.update(rank_fields(samples, now, gpus, tp, rank_rates, fields["decode_steps_per_s"]))
    if window:
        fields.update(slo_attainment(window, slo.ttft_p99_s, slo.itl_p99_s))
    return EngineView(**fields), window


def evaluate_node(
    state: NodeState,
    config: NodeConfig | None,
    layout: Layout,
    now: float,
    cache: RateCache | None = None,
    stalls: StallTimeline | None = None,
    unseen_because: str | None = None,
) -> tuple[NodeView, LatencyWindow]:
    """The node's view, and its latency window beside it (`Evaluated`).
    `cache`: rates kept from the previous tick (the same figures, derived cheaper).
    `stalls`: when the monitor's loop stood still, wall clock (see `node_status`).
    `unseen_because`: the down backend that alone shows this node (its status unknown)."""
    window = layout.cluster.window_s
    interval = layout.cluster.interval_s
    status, age = node_status(state, now, interval, layout.thresholds, stalls, unseen_because)
    gpu_samples = part_window(state, "gpus", now, window)
    nic_samples = part_window(state, "nics", now, window)
    engine_samples = part_window(state, "engine", now, window)
    name = state.name
    idle_pct = layout.thresholds.idle_util_pct

    def rates(part: str, extract: Extract, samples: list[NodeSample]) -> WindowRates:
        if cache is not None:
            return cache.rates(name, part, extract, samples, counter_trust, settle_span_s(interval))
        made = WindowRates(extract, counter_trust)
        made.min_span_s = settle_span_s(interval)
        return made.update(samples)

    gpu_rates = rates("gpus", gpu_counters, gpu_samples)
    nic_rates = rates("nics", nic_counters, nic_samples)
    engine_rates = rates("engine", engine_counters, engine_samples)
    gpus = gpu_views(gpu_samples, gpu_rates)
    power = total(g.power_w for g in gpus)
    cost = (
        node_cost_per_hour_usd(config, layout.pricing, len(gpus) if gpu_samples else None, power)
        if config is not None
        else None
    )
    notes: list[str] = []
    latest = state.latest()
    for sample in latest:
        notes.extend(n for n in sample.notes if n not in notes)
    declared = config.gpus if config is not None else None
    gpu_count = gpus_at_work(declared, len(gpus)) or None
    engine, latency_window = node_engine(
        engine_samples, now, engine_rates, gpu_count, tensor_parallel_size(config, layout),
        rates("engine_ranks", rank_counters, engine_samples), layout.slo,
    )
    mismatch = gpu_count_note(declared, len(gpus))
    if mismatch is not None:
        notes.append(mismatch)
    nics = nic_views(nic_samples, config, nic_rates, layout.thresholds.link_rate_ratio)
    rx_bytes_per_s, tx_bytes_per_s = nic_traffic(nics)
    # rates not trusted over this window (asked for above, by the views)
    for part, part_rates in (("GPU", gpu_rates), ("port", nic_rates), ("engine", engine_rates)):
        notes.extend(n for n in doubt_notes(part, part_rates) if n not in notes)
    silence = log_silence_note(engine, gpus, layout.thresholds)
    if silence is not None:
        notes.append(silence)
    view = NodeView(
        name=state.name,
        role=config.role if config else "mixed",
        status=status,
        error=unseen_because if status == "unknown" else state.error if status != "ok" else None,
        cost_per_hour_usd=cost,
        idle_fraction=idle_fraction(
            gpu_samples,
            idle_pct,
            cache.sums(name, ("idle", idle_pct), lambda s: idle_counts(s, idle_pct), gpu_samples)
            if cache
            else None,
        ),
        gpus=gpus,
        nics=nics,
        links=links_view(nics),
        rx_bytes_per_s=rx_bytes_per_s,
        tx_bytes_per_s=tx_bytes_per_s,
        **gpu_sums(gpus),
        engine=engine,
        age_s=age,
        gpus_age_s=gpus_trailing_s(gpu_samples, age, now, interval),
        sources=sorted(state.by_source),
        notes=notes,
        host=host_view(state),
        gpus_expected=config.gpus if config else None,
        # a node not answering is already a fault (its status): what it cannot show is no news
        coverage=node_coverage(config, latest, gpus, nics, engine) if status == "ok" else [],
        monitor_late=status == "ok" and late_by_monitor(state, now, interval, layout.thresholds, stalls),
        group=config.group if config is not None else None,
        idle_basis=idle_basis(gpus),
    )
    return view, latency_window


def rollup(
    nodes: Sequence[NodeView], layout: Layout, latency_windows: Mapping[str, LatencyWindow], *,
    whole_cluster: bool,
) -> RollupView:
    """Figures over the nodes that answer (status ok), cost and GPUs over all of them.

    A node that is stale, unreachable or in error is left out of the sums and means, and
    the roll-up says so (`nodes_counted` < `nodes_expected`): its last figures are old,
    and a sum without it must never read as the whole pool's.
    """
    counted = [n for n in nodes if n.status == "ok"]
    engines = [n.engine for n in counted if n.engine is not None]
    all_gpus = [g for n in counted for g in n.gpus]
    gpu_count = sum(gpus_at_work(n.gpus_expected, len(n.gpus)) for n in nodes)
    # a pool's acceptance weights each node by the tokens it produces, so that a busy node
    # counts for more than an idle one; an unweighted mean when nobody produced tokens
    weighted = [
        (e.draft_acceptance, e.accepted_tokens_per_s)
        for e in engines
        if e.draft_acceptance is not None and e.accepted_tokens_per_s
    ]
    weight = sum(w for _, w in weighted)
    acceptance = (
        sum(a * w for a, w in weighted) / weight
        if weight > 0
        else mean(e.draft_acceptance for e in engines)
    )
    node_costs = [n.cost_per_hour_usd for n in nodes]
    if whole_cluster:
        cost = cluster_cost_per_hour_usd(node_costs, layout.pricing) if nodes else None
    else:
        cost = total(node_costs)  # extras are billed to the cluster, not to a role
    scoreboard = pool_scoreboard(nodes, latency_windows, layout.slo.ttft_p99_s, layout.slo.itl_p99_s)
    tokens = total(e.accepted_tokens_per_s for e in engines)
    return RollupView(
        nodes=len(nodes),
        gpus=gpu_count,
        cost_per_hour_usd=cost,
        decode_steps_per_s=mean(e.decode_steps_per_s for e in engines),
        draft_acceptance=acceptance,
        accepted_tokens_per_s=total(e.accepted_tokens_per_s for e in engines),
        full_acceptance_tokens_per_s=total(e.full_acceptance_tokens_per_s for e in engines),
        requests_running=total(e.requests_running for e in engines),
        requests_waiting=total(e.requests_waiting for e in engines),
        util_pct=mean(g.util_pct for g in all_gpus),
        idle_fraction=mean(n.idle_fraction for n in counted),
        nodes_counted=len(counted),
        nodes_expected=len(nodes),
        **scoreboard,
        **cost_fields(cost, tokens, scoreboard["goodput_share_low"], scoreboard["goodput_share_high"]),
    )


def evaluate_nodes(
    state: FleetState,
    layout: Layout,
    now: float,
    cache: RateCache | None = None,
    stalls: StallTimeline | None = None,
    unseen: Mapping[str, str] | None = None,
) -> Evaluated:
    """`cache`: kept by the caller from tick to tick (`Monitor` does) to derive each
    tick's rates from the last tick's instead of from the whole window. `stalls`: when
    the monitor's own loop stood still (wall clock; see `figures.node_status`).
    `unseen`: node → the down backend that alone shows it (monitor.evaluation.backends)."""
    unseen = unseen or {}
    configs = {n.name: n for n in layout.nodes}
    order = [n.name for n in layout.nodes if n.name is not None]
    order += sorted(name for name in state.nodes if name not in configs)
    order = [name for name in order if name in state.nodes]
    if cache is not None:
        cache.forget_except(set(order))
    evaluated = [
        evaluate_node(state.nodes[name], configs.get(name), layout, now, cache, stalls, unseen.get(name))
        for name in order
    ]
    nodes = [view for view, _ in evaluated]
    windows = {view.name: window for view, window in evaluated if window}
    # a blind spot every peer shares is the cluster's finding, not each node's; drift is
    # judged against the pool, so once every node's view is made
    return Evaluated(with_config_drift(mark_shared(nodes)), windows)


def evaluate_cluster(
    nodes: Sequence[NodeView], layout: Layout, latency_windows: Mapping[str, LatencyWindow]
) -> ClusterView:
    """`latency_windows`: node name → its latency window (`Evaluated`)."""
    roles = sorted({n.role for n in nodes})
    points, source = reference_points(layout)
    whole = rollup(nodes, layout, latency_windows, whole_cluster=True)
    return ClusterView(
        name=layout.cluster.name,
        interval_s=layout.cluster.interval_s,
        total=whole,
        roles={
            r: rollup([n for n in nodes if n.role == r], layout, latency_windows, whole_cluster=False)
            for r in roles
        },
        insecure_ssh=layout.ssh.insecure_no_host_key_check,
        reference_points=[ReferencePointView(**p.model_dump()) for p in points],
        reference_source=source,
        slo_ttft_p99_s=layout.slo.ttft_p99_s,
        slo_itl_p99_s=layout.slo.itl_p99_s,
        blind_nodes=sum(any(v.kind == BLIND for v in n.verdicts) for n in nodes),
        shared_blind_spots=shared_blind_spots(nodes, layout.thresholds),
    )
