"""infertop's derived figures as Prometheus metrics, read from the latest Snapshot.

A prometheus_client custom collector: each scrape renders whatever `Snapshot` the monitor
published last (an immutable object swapped by reference, so the HTTP thread never sees
one half-built). Unknown figures are left out, never exported as 0. Verdicts and node
status are labelled gauges (`infertop_node_verdict{node,kind,severity} 1`), the usual
Prometheus shape for a state that alerting rules match on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from infertop.monitor import VERSION
from infertop.monitor.exporter_ranks import rank_families, rank_metric_names
from infertop.monitor.snapshot import (
    EngineView,
    MonitorHealthView,
    NicView,
    NodeView,
    PdEndView,
    PdPathView,
    RollupView,
    SessionView,
    Snapshot,
)

STATUSES = ("ok", "stale", "unreachable", "error", "unknown")

# (metric suffix, help, how to read it off a node) — engine figures
_NODE_ENGINE: tuple[tuple[str, str, Callable[[EngineView], float | None]], ...] = (
    ("decode_steps_per_second", "Engine decode steps per second", lambda e: e.decode_steps_per_s),
    ("draft_acceptance_ratio", "Accepted / drafted speculative tokens", lambda e: e.draft_acceptance),
    ("mean_acceptance_length", "1 + accepted / drafts (includes the bonus token)",
     lambda e: e.mean_acceptance_length),
    ("accepted_tokens_per_second", "Accepted output tokens per second", lambda e: e.accepted_tokens_per_s),
    ("full_acceptance_tokens_per_second",
     "Tokens per second had every draft token been accepted: produced + draft tokens rejected",
     lambda e: e.full_acceptance_tokens_per_s),
    ("requests_running", "Requests running in the engine", lambda e: e.requests_running),
    ("requests_waiting", "Requests waiting in the engine queue", lambda e: e.requests_waiting),
    ("kv_cache_usage_ratio", "KV cache usage, 0-1", lambda e: e.kv_cache_usage),
    ("engine_healthy", "The engine's own health gauge: 1 healthy, 0 not (where served)",
     lambda e: None if e.healthy is None else float(e.healthy)),
)
_NODE_OTHER: tuple[tuple[str, str, Callable[[NodeView], float | None]], ...] = (
    ("idle_ratio", "Share of the node's GPU-time in the window below the idle threshold",
     lambda n: n.idle_fraction),
    ("cost_usd_per_hour", "What the node costs per hour, USD", lambda n: n.cost_per_hour_usd),
    ("sample_age_seconds", "Age of the node's newest good sample", lambda n: n.age_s),
    ("gpus_age_seconds", "Age of the node's per-GPU figures, where read on a rotation (detail)",
     lambda n: n.gpus_age_s),
    ("gpus", "GPUs reporting on the node", lambda n: float(len(n.gpus)) if n.gpus else None),
    ("config_drift_settings", "Engine settings differing from the role pool's majority",
     lambda n: float(len(n.config_drift)) if n.engine is not None and n.engine.settings else None),
)
_SESSION: tuple[tuple[str, str, Callable[[SessionView], float | None]], ...] = (
    ("spend_usd", "Spend since the reservation start, USD", lambda s: s.spend_usd),
    ("idle_spend_usd", "Spend on idle GPU-time, USD", lambda s: s.idle_spend_usd),
    ("cost_usd_per_hour", "Cluster cost per hour now, USD", lambda s: s.cost_per_hour_usd),
    ("usd_per_million_output_tokens", "Spend per 1M accepted output tokens, USD",
     lambda s: s.usd_per_million_output_tokens),
    ("api_equivalent_usd", "What the same tokens would have cost at the API, USD",
     lambda s: s.api_equivalent_usd),
    ("budget_usd", "The session budget, USD", lambda s: s.budget_usd),
    ("budget_used_ratio", "Spend / budget", lambda s: s.budget_used_fraction),
    ("accepted_tokens", "Accepted output tokens counted since tokens_since", lambda s: s.accepted_tokens),
    ("elapsed_seconds", "Seconds since the reservation start", lambda s: s.elapsed_s),
    ("breakeven_output_tokens_per_second",
     "Output tokens/s the cluster must sustain to cost no more than the API now",
     lambda s: s.breakeven_output_tokens_per_s),
    ("projected_spend_usd", "Spend at the reservation end at the current cost per hour, USD",
     lambda s: s.projected_spend_usd),
    ("energy_kwh", "GPU energy counted this session, kWh", lambda s: s.energy_kwh),
    ("joules_per_output_token", "GPU energy per output token, J", lambda s: s.joules_per_output_token),
)
_ROLLUP: tuple[tuple[str, str, Callable[[RollupView], float | None]], ...] = (
    ("decode_steps_per_second", "Mean decode steps per second over the role's nodes",
     lambda r: r.decode_steps_per_s),
    ("accepted_tokens_per_second", "Accepted output tokens per second, summed",
     lambda r: r.accepted_tokens_per_s),
    ("full_acceptance_tokens_per_second", "Full-acceptance tokens per second, summed",
     lambda r: r.full_acceptance_tokens_per_s),
    ("draft_acceptance_ratio", "Pooled draft acceptance", lambda r: r.draft_acceptance),
    ("idle_ratio", "Mean idle fraction", lambda r: r.idle_fraction),
    ("cost_usd_per_hour", "Cost per hour, USD", lambda r: r.cost_per_hour_usd),
    ("nodes", "Nodes", lambda r: float(r.nodes)),
    ("nodes_counted", "Nodes the role's figures count (status ok); fewer than nodes: partial",
     lambda r: None if r.nodes_counted is None else float(r.nodes_counted)),
)

# the scoreboard's (docs/snapshot.md, "Scoreboard"); latency percentiles are interpolated
# within the engines' histogram buckets
_LATENCY = tuple(
    (f"{name}_{p}_seconds", f"{text} {p}, interpolated within its histogram bucket",
     f"{name}_{p}_s")
    for name, text in (("ttft", "Time to first token"), ("itl", "Inter-token latency"),
                       ("e2e", "End-to-end request latency"), ("queue", "Queue time"))
    for p in ("p50", "p99")
)
_SCOREBOARD = (
    *_LATENCY,
    ("prefix_cache_hit_ratio", "Prefix-cache hit tokens / looked-up tokens", "prefix_cache_hit_rate"),
    ("preemptions_per_second", "Requests preempted per second", "preemptions_per_s"),
    ("kv_transfer_bytes_per_second", "KV cache bytes moved prefill → decode per second",
     "kv_transfer_bytes_per_s"),
    ("output_tokens_per_second_per_gpu", "Accepted output tokens per second per GPU",
     "output_tokens_per_s_per_gpu"),
    ("full_acceptance_tokens_per_second_per_gpu", "Full-acceptance tokens per second per GPU",
     "full_acceptance_tokens_per_s_per_gpu"),
    ("output_tokens_per_second_per_user", "Accepted output tokens per second per running request",
     "output_tokens_per_s_per_user"),
    ("slo_ttft_attainment_ratio", "Share of requests within the layout's TTFT target, at least",
     "slo_ttft_attainment"),
    ("slo_itl_attainment_ratio", "Share of inter-token gaps within the layout's ITL target, at least",
     "slo_itl_attainment"),
    ("slo_ttft_attainment_high_ratio", "Share of requests within the layout's TTFT target, at most",
     "slo_ttft_attainment_high"),
    ("slo_itl_attainment_high_ratio", "Share of inter-token gaps within the layout's ITL target, at most",
     "slo_itl_attainment_high"),
)
_NODE_ENGINE = (*_NODE_ENGINE, *((s, t, lambda e, f=f: getattr(e, f)) for s, t, f in _SCOREBOARD))
_ROLLUP = (*_ROLLUP, *((s, t, lambda r, f=f: getattr(r, f)) for s, t, f in _SCOREBOARD))
# goodput (monitor/evaluation/goodput.py): the share within every [slo] target, as bounds
_GOODPUT = (
    ("goodput_share_low_ratio", "Share of the window's requests within every [slo] target, at least",
     "goodput_share_low"),
    ("goodput_share_high_ratio", "Share of the window's requests within every [slo] target, at most",
     "goodput_share_high"),
    ("usd_per_million_good_tokens_low", "USD per 1M good output tokens now (share at its high bound)",
     "usd_per_million_good_tokens_low"),
    ("usd_per_million_good_tokens_high", "USD per 1M good output tokens now (share at its low bound)",
     "usd_per_million_good_tokens_high"),
)
_ROLLUP = (*_ROLLUP, *((s, t, lambda r, f=f: getattr(r, f)) for s, t, f in _GOODPUT))
_SESSION = (*_SESSION, *(
    (s, t, lambda x, f=f: getattr(x, f)) for s, t, f in _SCOREBOARD if f in (
        "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
        "full_acceptance_tokens_per_s_per_gpu",
    )
))


# the prefill → decode path (monitor/evaluation/pd_path.py), labelled by its two pools
_PD_PATH: tuple[tuple[str, str, Callable[[PdPathView], float | None]], ...] = (
    ("kv_bytes_per_second", "KV cache bytes/s moved prefill → decode (absent above the line rate)",
     lambda p: p.kv_bytes_per_s),
    ("kv_bytes_per_second_reported", "KV cache bytes/s as the engines report it",
     lambda p: p.kv_bytes_per_s_reported),
    ("kv_transfer_mean_seconds", "Mean duration of one KV transfer", lambda p: p.kv_transfer_mean_s),
    ("kv_transfer_p50_seconds", "Median KV transfer duration, within its histogram bucket",
     lambda p: p.kv_transfer_p50_s),
    ("kv_transfer_p99_seconds", "p99 KV transfer duration, within its histogram bucket",
     lambda p: p.kv_transfer_p99_s),
    ("kv_transfer_failures_per_second", "Failed KV transfers per second",
     lambda p: p.kv_transfer_failures_per_s),
    ("kv_transfer_expired_per_second", "Requests whose KV expired before decode read it, per second",
     lambda p: p.kv_transfer_expired_per_s),
    ("above_line_rate", "1 when the KV rate exceeds the ports' line rate (a measurement problem)",
     lambda p: None if p.above_line_rate is None else float(p.above_line_rate)),
    ("congested", "1 when congestion evidence rises on either end (or the rate nears the line)",
     lambda p: None if p.congested is None else float(p.congested)),
)
_PD_END: tuple[tuple[str, str, Callable[[PdEndView], float | None]], ...] = (
    ("line_rate_bytes_per_second", "The end's fabric ports' line rate, bytes/s",
     lambda e: e.line_rate_bytes_per_s),
    ("receive_bytes_per_second", "Bytes/s received on the end's fabric ports", lambda e: e.rx_bytes_per_s),
    ("transmit_bytes_per_second", "Bytes/s sent on the end's fabric ports", lambda e: e.tx_bytes_per_s),
    ("xmit_wait_per_second", "IB port_xmit_wait ticks per second", lambda e: e.xmit_wait_per_s),
    ("pause_received_per_second", "RoCE pause frames received per second", lambda e: e.rx_pause_per_s),
    ("pause_sent_per_second", "RoCE pause frames sent per second", lambda e: e.tx_pause_per_s),
    ("cnp_sent_per_second", "Congestion notifications sent per second", lambda e: e.cnp_sent_per_s),
    ("cnp_handled_per_second", "Congestion notifications handled per second", lambda e: e.cnp_handled_per_s),
)


# RoCE congestion per port (node screen PAUSE/S and CNP/S): only ports whose source reads
# the counter, so a fleet of IB or plain Ethernet ports adds no series
_PORT: tuple[tuple[str, str, Callable[[NicView], float | None]], ...] = (
    ("pause_received_per_second", "RoCE pause frames received per second on the port",
     lambda p: p.rx_pause_per_s),
    ("pause_sent_per_second", "RoCE pause frames sent per second on the port", lambda p: p.tx_pause_per_s),
    ("cnp_sent_per_second", "Congestion notifications the port sent per second (ECN-marked traffic arrived)",
     lambda p: p.cnp_sent_per_s),
    ("cnp_handled_per_second", "Congestion notifications the port acted on per second",
     lambda p: p.cnp_handled_per_s),
)


def _port_families(nodes: list[NodeView]) -> Iterator[GaugeMetricFamily]:
    for suffix, text, get_p in _PORT:
        fam = GaugeMetricFamily(f"infertop_port_{suffix}", text, labels=["node", "port"])
        for n in nodes:
            for port in n.nics:
                value = get_p(port)
                if value is not None:
                    fam.add_metric([n.name, port.name], value)
        yield fam


def _pd_families(paths: list[PdPathView]) -> Iterator[GaugeMetricFamily]:
    labels = ["prefill_pool", "decode_pool"]
    for suffix, text, get_p in _PD_PATH:
        fam = GaugeMetricFamily(f"infertop_pd_{suffix}", text, labels=labels)
        for p in paths:
            value = get_p(p)
            if value is not None:
                fam.add_metric([p.prefill_pool, p.decode_pool], value)
        yield fam
    for suffix, text, get_e in _PD_END:
        fam = GaugeMetricFamily(f"infertop_pd_end_{suffix}", text, labels=[*labels, "end"])
        for p in paths:
            for end_name, end in (("prefill", p.prefill), ("decode", p.decode)):
                value = get_e(end) if end is not None else None
                if value is not None:
                    fam.add_metric([p.prefill_pool, p.decode_pool, end_name], value)
        yield fam


def _monitor_figures(h: MonitorHealthView) -> tuple[tuple[str, str, float | None], ...]:
    return (
        ("lag_seconds", "How late the monitor's recent ticks ran against their slots", h.lag_s),
        ("loop_stall_max_seconds", "The monitor's longest recent event-loop stall", h.loop_stall_max_s),
        ("cpu_ratio", "The monitor process's CPU time over wall time (1 = one core)",
         None if h.cpu_pct is None else h.cpu_pct / 100.0),
        ("nodes_excused", "Nodes judged fresh only because the monitor's stalls were excused",
         float(h.nodes_excused)),
        ("rounds_late", "Recent frames drawn before all their readings were in (the monitor was slow)",
         float(h.rounds_late)),
    )


def snapshot_families(snapshot: Snapshot) -> Iterator[GaugeMetricFamily | InfoMetricFamily]:
    """Every metric family for one snapshot (pure: used by the collector and by tests)."""
    info = InfoMetricFamily("infertop", "infertop build and the cluster it watches")
    info.add_metric([], {"version": VERSION, "cluster": snapshot.cluster.name})
    yield info
    taken = dt.datetime.fromisoformat(snapshot.taken_at).timestamp()
    yield GaugeMetricFamily("infertop_snapshot_timestamp_seconds", "When the snapshot was taken",
                            value=taken)
    nodes = snapshot.nodes
    for suffix, text, get_e in _NODE_ENGINE:
        fam = GaugeMetricFamily(f"infertop_node_{suffix}", text, labels=["node", "role"])
        for n in nodes:
            value = get_e(n.engine) if n.engine is not None else None
            if value is not None:
                fam.add_metric([n.name, n.role], value)
        yield fam
    for suffix, text, get_n in _NODE_OTHER:
        fam = GaugeMetricFamily(f"infertop_node_{suffix}", text, labels=["node", "role"])
        for n in nodes:
            value = get_n(n)
            if value is not None:
                fam.add_metric([n.name, n.role], value)
        yield fam
    status = GaugeMetricFamily("infertop_node_status", "1 for the node's current status",
                               labels=["node", "role", "status"])
    verdicts = GaugeMetricFamily("infertop_node_verdict", "1 for each verdict active on a node",
                                 labels=["node", "kind", "severity"])
    for n in nodes:
        for s in STATUSES:
            status.add_metric([n.name, n.role, s], 1.0 if n.status == s else 0.0)
        for v in n.verdicts:
            verdicts.add_metric([n.name, v.kind, v.severity], 1.0)
    yield status
    yield verdicts
    restarted = GaugeMetricFamily(
        "infertop_node_last_restart_timestamp_seconds",
        "When the node's engine last restarted (counters began anew), among the recent timeline",
        labels=["node", "role"])
    roles = {n.name: n.role for n in nodes}
    last_restart: dict[str, float] = {}
    for event in snapshot.timeline:
        if event.kind == "restart" and event.node in roles:
            last_restart[event.node] = event.at
    for name, at in last_restart.items():
        restarted.add_metric([name, roles[name]], at)
    yield restarted
    # a blind spot every peer shares is the cluster's, said once (never a node verdict)
    shared = GaugeMetricFamily(
        "infertop_cluster_shared_blind_spot_nodes",
        "Nodes that all share a blind spot (coverage kind), said once at cluster level",
        labels=["kind"],
    )
    by_kind: dict[str, int] = {}
    for spot in snapshot.cluster.shared_blind_spots:
        for kind in spot.kinds:
            by_kind[kind] = by_kind.get(kind, 0) + spot.nodes
    for kind, count in by_kind.items():
        shared.add_metric([kind], float(count))
    yield shared
    yield from rank_families(snapshot)  # per engine, per GPU activity (issue 35)
    session = snapshot.session
    for suffix, text, get_s in _SESSION:
        value = get_s(session)
        if value is not None:
            yield GaugeMetricFamily(f"infertop_session_{suffix}", text, value=value)
    health = snapshot.monitor
    if health is not None:  # the monitor's own lateness, never the nodes' (monitor/health.py)
        yield GaugeMetricFamily("infertop_monitor_lagging", "1 while the monitor cannot keep up",
                                value=1.0 if health.lagging else 0.0)
        for suffix, text, value in _monitor_figures(health):
            if value is not None:
                yield GaugeMetricFamily(f"infertop_monitor_{suffix}", text, value=value)
    behind = GaugeMetricFamily("infertop_backend_behind_seconds",
                               "How far the metrics backend's newest sample trailed the wall clock",
                               labels=["backend"])
    up = GaugeMetricFamily("infertop_backend_up", "1 while the metrics backend answers, 0 while it is down",
                           labels=["backend"])
    for backend in snapshot.backends:
        if backend.behind_s is not None:
            behind.add_metric([backend.name], backend.behind_s)
        up.add_metric([backend.name], 1.0 if backend.status == "ok" else 0.0)
    yield behind
    yield up
    if snapshot.detail is not None:  # how much per-node detail a tick read (prom_detail.py)
        yield GaugeMetricFamily("infertop_detail_nodes", "Nodes whose per-GPU detail the last tick read",
                                value=float(snapshot.detail.nodes))
        if snapshot.detail.every_s is not None:
            yield GaugeMetricFamily("infertop_detail_every_seconds",
                                    "Every node's per-GPU detail is read within this",
                                    value=snapshot.detail.every_s)
    yield from _pd_families(snapshot.pd_paths)
    yield from _port_families(snapshot.nodes)
    pools = {"all": snapshot.cluster.total, **snapshot.cluster.roles}
    for suffix, text, get_r in _ROLLUP:
        fam = GaugeMetricFamily(f"infertop_role_{suffix}", text, labels=["role"])
        for role, rollup in pools.items():
            value = get_r(rollup)
            if value is not None:
                fam.add_metric([role], value)
        yield fam


class SnapshotCollector(Collector):
    """Renders `latest()` on every scrape; nothing at all before the first snapshot."""

    def __init__(self, latest: Callable[[], Snapshot | None]):
        self.latest = latest

    def collect(self) -> Iterator[GaugeMetricFamily | InfoMetricFamily]:
        snapshot = self.latest()
        if snapshot is not None:
            yield from snapshot_families(snapshot)


def metric_names() -> set[str]:
    """Every family name the exporter may serve (dashboards and tests check against it)."""
    names = {"infertop_info", "infertop_snapshot_timestamp_seconds", "infertop_node_status",
             "infertop_node_verdict", "infertop_node_last_restart_timestamp_seconds",
             "infertop_cluster_shared_blind_spot_nodes"}
    names |= {f"infertop_node_{s}" for s, _, _ in _NODE_ENGINE}
    names |= {f"infertop_node_{s}" for s, _, _ in _NODE_OTHER}
    names |= {f"infertop_session_{s}" for s, _, _ in _SESSION}
    names |= {f"infertop_role_{s}" for s, _, _ in _ROLLUP}
    names |= {"infertop_monitor_lagging"}
    names |= rank_metric_names()
    names |= {f"infertop_pd_{s}" for s, _, _ in _PD_PATH}
    names |= {f"infertop_pd_end_{s}" for s, _, _ in _PD_END}
    names |= {f"infertop_port_{s}" for s, _, _ in _PORT}
    names |= {f"infertop_monitor_{s}" for s, _, _ in _monitor_figures(MonitorHealthView())}
    names |= {"infertop_backend_behind_seconds", "infertop_backend_up"}
    names |= {"infertop_detail_nodes", "infertop_detail_every_seconds"}
    return names
