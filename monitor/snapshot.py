"""The immutable picture of the cluster at one instant: what every view renders.

Its JSON form is the stable `infertop.snapshot/1` interface of docs/snapshot.md: the
field names here are that contract. Unknown values are `None` (JSON null), never 0.
Fields may be added (each listed in docs/snapshot.md: a test checks it); none may be
renamed or dropped.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from infertop.collectors.sample import GpuProcess, port_is_up

SCHEMA = "infertop.snapshot/1"
# "unknown": the node cannot be seen because the metrics backend (or shard) it is read
# through is down; said once on the backend (Snapshot.backends), never the node's fault
NodeStatus = Literal["ok", "stale", "unreachable", "error", "unknown"]
# what the STATUS column says and the `/` filter matches (monitor.evaluation.judging):
# reachability and the verdicts in one word
Standing = Literal[
    "reading", "judging", "ok", "warning", "critical", "stale", "unreachable", "error", "unknown"
]
Severity = Literal["info", "warning", "critical"]
ClockEventLevel = Literal["none", "warning", "critical"]


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class GpuView(_View):
    index: int
    name: str | None = None
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    # additions
    kind: str = "gpu"
    mem_info_version: int | None = None  # NVML memory call: 2 as nvidia-smi, 1 older (see sample)
    clock_event_reasons: int | None = None
    xid_last: int | None = None
    ecc_uncorrected_total: int | None = None
    healthy: bool | None = None
    error: str | None = None
    nvlink_links_total: int | None = None
    nvlink_links_up: int | None = None
    nvlink_tx_bytes_per_s: float | None = None
    nvlink_rx_bytes_per_s: float | None = None
    nvlink_bytes_per_s: float | None = None  # both directions, where not split (dcgm default)
    # judged by the evaluation (clock_events.py), so every viewer agrees with the verdicts
    clock_events: list[str] | None = None  # labels of the set reasons; None: unknown
    clock_event_level: ClockEventLevel | None = None  # worst of them; None: unknown
    # real compute activity, 0–100 over the last interval (NVML GPM or dcgm-exporter's
    # DCGM_FI_PROF_*); activity_source says which. None: not read (no GPM, no profiling)
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    activity_source: str | None = None  # "gpm" | "dcgm"
    # who holds the GPU (NVML + /proc); None: not read by this node's source
    # (pid, user, command, cgroup, gpu_mem_bytes: the sample's own typed record)
    processes: list[GpuProcess] | None = None


class NicView(_View):
    name: str
    kind: str
    state: str | None = None
    speed_gbps: float | None = None
    expected_gbps: float | None = None
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None
    # additions
    xmit_wait_per_s: float | None = None
    link_downed_total: float | None = None
    errors_per_s: float | None = None
    # per-port error rates from node_exporter's counters (reset-aware, like every rate)
    rx_errors_per_s: float | None = None
    tx_errors_per_s: float | None = None
    rx_drops_per_s: float | None = None
    tx_drops_per_s: float | None = None
    link_recoveries_per_s: float | None = None
    link_integrity_errors_per_s: float | None = None
    # RoCE congestion: pause frames received / sent, congestion notifications sent /
    # handled, per second (None: the source does not read them)
    rx_pause_per_s: float | None = None
    tx_pause_per_s: float | None = None
    # the same pause frames per priority, "rx3" / "tx3" → per second (None: a priority's
    # rate not known yet); None: the source reads no per-priority counters
    pause_per_s_by_priority: dict[str, float | None] | None = None
    cnp_sent_per_s: float | None = None
    cnp_handled_per_s: float | None = None
    ecn_marked_per_s: float | None = None  # ECN-marked packets received per second
    physical_state: str | None = None
    members: list[str] | None = None
    members_up: int | None = None
    accelerator_index: int | None = None
    # judged by the evaluation against the layout's `link_rate_ratio` of the expected speed
    slow: bool | None = None  # None: speed or expectation unknown
    # a byte rate read above the port's line rate: withheld (null), a measurement, not a speed
    above_line_rate: bool | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def up(self) -> bool | None:
        """Up by the one rule every part of infertop uses (`collectors.sample.port_is_up`)."""
        return port_is_up(self.state)


# The latency figures, declared once here and shared by a node's engine (EngineView), each
# of its data-parallel engines (EngineRankView: the TTFT / ITL set) and a pool (RollupView).
# pydantic orders a model's fields base by base, the last base first, then its own; the
# JSON carries them in that order, and `infertop.snapshot/1` has always carried the latency
# figures amid each view's others. So each group is a class of its own, and a view takes
# its fields that come before them from a `…Head` base: the key order stays the one the
# JSON always had (tests/monitor/test_snapshot_bytes.py holds it, byte for byte).


class _TtftItlPercentiles(_View):
    """Percentiles over the window from the histograms' bucket increases, interpolated
    within the bucket that holds them (monitor/evaluation/latency.py, scoreboard.py)."""

    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None


class _RequestPercentiles(_View):
    """A request's whole latency (e2e) and its time queued, as above."""

    e2e_p50_s: float | None = None
    e2e_p99_s: float | None = None
    queue_p50_s: float | None = None
    queue_p99_s: float | None = None


class _LatencyBounds(_View):
    # "ttft_p99" → [lower, upper] bounds of the bucket the percentile fell in (upper
    # null: past the highest finite bound), so a viewer can say "25–50 ms"
    latency_bounds_s: dict[str, tuple[float, float | None]] = Field(default_factory=dict)


class RankLatency(_LatencyBounds, _TtftItlPercentiles):
    """A data-parallel engine's latency figures: TTFT and ITL, with their buckets."""


class WindowLatency(_LatencyBounds, _RequestPercentiles, _TtftItlPercentiles):
    """A node's or a pool's latency figures over the window (a pool's from its nodes'
    summed bucket increases, never a mean of their percentiles)."""

    latency_requests: dict[str, float] = Field(default_factory=dict)  # observations in window


class _EngineViewHead(_View):
    """EngineView's fields before its latency figures (a base for the JSON's key order)."""

    decode_steps_per_s: float | None = None
    draft_acceptance: float | None = None
    mean_acceptance_length: float | None = None
    accepted_tokens_per_s: float | None = None
    full_acceptance_tokens_per_s: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    # additions
    draft_tokens_per_s: float | None = None  # tokens drafted (proposed), accepted or not
    # per draft position 0..k-1: the share of drafts whose token there was accepted,
    # Δaccepted[i] / Δdrafts (vLLM's per-position counters); None: not served
    acceptance_by_position: list[float | None] | None = None
    prompt_tokens_per_s: float | None = None
    requests_finished_per_s: float | None = None  # ended normally (stop / length)
    requests_aborted_per_s: float | None = None  # aborted or failed, not in the line above
    source: str | None = None  # "endpoint" or "log"
    profile: str | None = None
    age_s: float | None = None  # age of the newest engine figure (log line or scrape)


class EngineView(WindowLatency, _EngineViewHead):
    """A node's engine over the window: the head's figures, the scoreboard's latency
    (WindowLatency), and these."""

    # why the percentiles are null although the engine publishes latency buckets: "no
    # latency reading in this window" (fewer than two readings of them in it); else null
    latency_note: str | None = None
    prefix_cache_hit_rate: float | None = None  # local cache: hit tokens / queried tokens
    external_prefix_cache_hit_rate: float | None = None  # through a KV connector
    preemptions_per_s: float | None = None
    kv_transfer_bytes_per_s: float | None = None
    kv_transfer_failures_per_s: float | None = None
    kv_transfer_expired_per_s: float | None = None  # NIXL: requests whose KV expired (prefill side)
    kv_transfer_mean_s: float | None = None  # mean duration of one transfer (NIXL)
    kv_transfer_latency_s: float | None = None  # SGLang's latest transfers' latency
    kv_transfer_speed_bytes_per_s: float | None = None  # SGLang's latest transfers' speed
    expert_balancedness: float | None = None  # SGLang EPLB: mean / max expert load
    requests_running_mean: float | None = None  # over the window
    output_tokens_per_s_per_gpu: float | None = None  # accepted tokens/s ÷ node GPUs
    full_acceptance_tokens_per_s_per_gpu: float | None = None
    output_tokens_per_s_per_user: float | None = None  # accepted tokens/s ÷ mean running
    # share of requests (ITL: tokens) within the layout's target, at least; `_high`: at most
    # (goodput.share_bounds: equal where the target is a bucket bound)
    slo_ttft_attainment: float | None = None
    slo_itl_attainment: float | None = None
    slo_ttft_attainment_high: float | None = None
    slo_itl_attainment_high: float | None = None
    # the engine's settings from its info gauges ("cache.block_size" → "16"), as served:
    # page text, shown inert; None when the engine serves no info gauge
    settings: dict[str, str] | None = None
    healthy: bool | None = None  # the engine's own health gauge; None: not served
    # the readings the window's figures were computed from: the first and the last engine
    # reading in the window (unix s; JSON: ISO 8601); None with fewer than two readings
    window_first_reading_at: float | None = None
    window_last_reading_at: float | None = None
    # a log source's figures cover its lines on the log's own clock: from the stamp of
    # the newest throughput line at the first reading (exclusive) to that at the last
    # (inclusive) (unix s, the node's local time; JSON: ISO 8601); None for an endpoint,
    # or with fewer than two readings that saw a throughput line
    log_window_start_at: float | None = None
    log_window_end_at: float | None = None
    # the node's data-parallel engines, each with the figures above over the same window
    # (monitor/evaluation/engine_ranks.py); None where the page tells no engines apart
    ranks: list[EngineRankView] | None = None
    # where `ranks` is known, `decode_steps_per_s` is the slowest busy rank's (it paces the
    # expert-parallel step; engine_ranks.node_steps_per_s): that rank's label when the ranks
    # differ ("engine 5 (GPU 5)"), and the fastest engine's counted steps/s, the old figure
    slowest_rank: str | None = None
    fastest_rank_steps_per_s: float | None = None


class _EngineRankViewHead(_View):
    """EngineRankView's fields before its latency figures (a base for the JSON's key order)."""

    key: str = ""  # the labels that tell it apart on the page: "engine=3", "dp_rank=1"
    dp_rank: int | None = None
    gpus: list[int] | None = None  # node-local GPU indices it runs on; None: unknown
    gpus_from: str | None = None  # "labels" (the page's tp_rank) or "layout" (tensor_parallel_size)
    label: str = ""  # "engine 3 (GPUs 6–7)": how verdicts and views name it
    decode_steps_per_s: float | None = None
    draft_acceptance: float | None = None
    mean_acceptance_length: float | None = None
    accepted_tokens_per_s: float | None = None
    full_acceptance_tokens_per_s: float | None = None
    draft_tokens_per_s: float | None = None
    acceptance_by_position: list[float | None] | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None


class EngineRankView(RankLatency, _EngineRankViewHead):
    """One data-parallel engine (rank) of a node: the node's engine figures for that rank
    alone, over the same window (the issue-35 set; the scoreboard's others stay per node,
    to keep a snapshot of 1,000 ranks small)."""


class VerdictView(_View):
    kind: str
    detail: str
    severity: Severity = "warning"
    since: float | None = None  # unix seconds when the verdict started (JSON: ISO 8601)
    usd_per_hour_at_stake: float | None = None
    # a condition seen but not yet held for its hold time: only reported when asked
    # (`infertop snapshot`, whose window may be shorter than the hold), never in the TUI
    pending: bool = False
    held_s: float | None = None  # how long a pending condition has held so far
    # a straggler's evidence against its pool, most telling first (straggler_evidence.py)
    evidence: list[EvidenceView] = Field(default_factory=list)
    # the figure the verdict rests on, over time (an acceptance drop: the node's draft
    # acceptance over its recent history); None where the verdict has none
    trend: TrendView | None = None


class EvidenceView(_View):
    """One figure of a straggler beside the median of its pool (issue 35)."""

    figure: str  # "slowest SM clock", "GPUs power-capped", …
    unit: str = ""  # "MHz", "°C", "GPUs", "/s", "%"
    value: float | None = None  # the straggler's (its rank's GPUs where a rank is named)
    median: float | None = None  # the pool's busy nodes', the straggler left out
    # how far the value sits from the median in the direction that would slow a rank,
    # relative to the median (0: not off; 1: twice as bad); None: not comparable
    off: float | None = None
    # a figure that is no number (an engine setting): the node's and the pool's, as text
    value_text: str | None = None
    median_text: str | None = None


class TrendPointView(_View):
    at: float  # unix s (JSON: ISO 8601)
    value: float | None = None


class TrendView(_View):
    """A verdict's figure over time, oldest first, with what it is held against."""

    figure: str  # "draft acceptance"
    unit: str = ""  # "%"
    step_s: float | None = None  # one point per this many seconds at most
    points: list[TrendPointView] = Field(default_factory=list)
    reference: float | None = None  # the level it is judged against (the pool's median)
    reference_label: str = ""  # "pool median"


class CoverageGap(_View):
    """Something the layout expects of a node that no source can see now, and why: a blind
    spot is a finding (the `blind` verdict quotes these), never silence."""

    # "gpus", "ports", "port_speed", "engine", "clock_events", or a source's own `unseen`
    # key ("nvlink", "ecc", …): what `thresholds.blind_ignore` names
    kind: str
    detail: str  # one line: "links unknown: node_exporter page failed (cannot connect to …)"
    # addition: every answering peer of the node (same role, read by the same sources) has
    # this same gap: it is said once at cluster level (`ClusterView.shared_blind_spots`),
    # not as this node's `blind` verdict (monitor/evaluation/shared_gaps.py)
    shared: bool = False


class ConfigDriftView(_View):
    """One setting in which a node's engine differs from its pool's majority
    (monitor/evaluation/config_drift.py)."""

    setting: str  # "cache.block_size"
    value: str  # this node's
    pool_value: str  # the majority's
    pool_agreeing: int  # nodes of the pool with the majority's value
    pool_reporting: int  # nodes of the pool that report the setting


class PdEndView(_View):
    """One end of the prefill → decode path: its pool's fabric ports, summed
    (monitor/evaluation/pd_path.py). None: no port of the pool reports the figure."""

    nodes: int  # answering nodes of the pool counted
    ports: int  # up fabric ports counted (RoCE / IB; Ethernet where a node has none)
    line_rate_bytes_per_s: float | None = None  # their negotiated speeds, summed, in bytes/s
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None
    xmit_wait_per_s: float | None = None  # IB port_xmit_wait ticks per second
    rx_pause_per_s: float | None = None  # RoCE pause frames received per second
    tx_pause_per_s: float | None = None
    cnp_sent_per_s: float | None = None  # congestion notifications sent (ECN-marked traffic arrived)
    cnp_handled_per_s: float | None = None  # congestion notifications acted on (told to slow down)
    congested_ports: list[str] = Field(default_factory=list)  # "decode-03/eth2: pause 1.2e+03/s"


class PdPathView(_View):
    """The prefill → decode KV path as one thing: the engines' transfer figures beside
    both ends' network figures (monitor/evaluation/pd_path.py)."""

    prefill_pool: str
    decode_pool: str
    # KV cache moved, per second (engines' counters); None when above the line rate
    kv_bytes_per_s: float | None = None
    kv_bytes_per_s_reported: float | None = None  # what the engines said, even above the line
    kv_counted_by: str | None = None  # "decode" or "prefill": which end's engines counted it
    kv_transfer_mean_s: float | None = None  # mean duration of one transfer (NIXL), over the nodes
    kv_transfer_p50_s: float | None = None  # of the pools' summed transfer-time histogram
    kv_transfer_p99_s: float | None = None
    kv_transfer_failures_per_s: float | None = None
    # requests whose KV expired on the prefill node before decode read it (NIXL)
    kv_transfer_expired_per_s: float | None = None
    prefill: PdEndView | None = None
    decode: PdEndView | None = None
    # the KV rate exceeds what the narrower end's ports can carry: a measurement problem
    # (a counter of something else, a double count), not a speed; None: unknown
    above_line_rate: bool | None = None
    congested: bool | None = None  # congestion counters rise on either end; None: none read
    # what `congested` / the verdict rests on: "congestion counters (pause, CNP)" or
    # "rate against line rate (no congestion counters read)"
    evidence: str | None = None
    detail: str = ""  # one line for viewers and the report


class TimelineEventView(_View):
    """One thing that happened, on a node or to the cluster (monitor/evaluation/timeline.py)."""

    at: float  # unix seconds when it happened (JSON: ISO 8601)
    # "restart", "health", "preemption-burst", "config-change", "verdict-onset",
    # "verdict-clear", "phase"
    kind: str
    node: str | None = None  # None: the cluster's (a phase mark)
    detail: str = ""


class LinksView(_View):
    """A node's ports at a glance: those the layout expects, else every real port."""

    up: int
    down: int  # ports with a known state that is not up ("down", "missing", …)
    total: int
    expected: bool  # the ports are ones the layout expects (a down one is trouble)
    degraded: bool  # an expected port is slower than expected, or a bond lost a member
    trouble: bool  # expected ports down or degraded


class HostView(_View):
    cpu_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None


class NodeView(_View):
    name: str
    role: str
    status: NodeStatus
    error: str | None = None
    cost_per_hour_usd: float | None = None
    idle_fraction: float | None = None
    # when its engine last restarted, while that is marked (monitor/evaluation/restart_marks.py)
    restarted_at: float | None = None
    verdicts: list[VerdictView] = Field(default_factory=list)
    gpus: list[GpuView] = Field(default_factory=list)
    nics: list[NicView] = Field(default_factory=list)
    engine: EngineView | None = None
    # additions
    age_s: float | None = None  # age of the newest good sample
    sources: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    host: HostView | None = None
    gpus_expected: int | None = None
    links: LinksView | None = None
    rx_bytes_per_s: float | None = None  # over the counted ports, bond members folded in
    tx_bytes_per_s: float | None = None
    # over the node's GPUs (None when none reports the figure)
    gpu_util_pct: float | None = None  # mean
    gpu_mem_used_bytes: float | None = None  # sum
    gpu_mem_total_bytes: float | None = None  # sum
    gpu_power_w: float | None = None  # sum
    # the age of its newest per-GPU reading, where that trails its newest reading by more
    # than an interval: its per-GPU detail read through a backend on the rotation
    # (collectors/sources/prom_detail.py), judged on it and its node-level figures
    gpus_age_s: float | None = None
    # what the layout expects here that no source sees now, each with its reason
    coverage: list[CoverageGap] = Field(default_factory=list)
    # fresh only because the time the monitor itself stood still was not counted against
    # the node's sample age (monitor.evaluation.figures.node_status): the monitor is late
    monitor_late: bool = False
    # the layout's grouping of the node within its pool (a `group` key, else the `hosts`
    # range it came from); None: not grouped. The fleet map draws by it
    group: str | None = None
    # which GPU figure judged idle_fraction and the idle verdict: "sm_active" (NVML GPM /
    # DCGM profiling), "util", or "sm_active+util" (some GPUs each); None: no GPU figures
    idle_basis: str | None = None
    # settings in which this node's engine differs from its role pool's majority
    config_drift: list[ConfigDriftView] = Field(default_factory=list)
    # the node's standing in one word (monitor.evaluation.judging.node_standing): what the
    # STATUS column draws; None in records written before it (viewers then draw `status`)
    standing: Standing | None = None
    # seconds until the node's first verdicts can come (its first verdict window closes);
    # None once judged
    first_verdicts_in_s: float | None = None


class _RollupViewHead(_View):
    """RollupView's fields before its latency figures (a base for the JSON's key order)."""

    nodes: int
    gpus: int
    cost_per_hour_usd: float | None = None
    decode_steps_per_s: float | None = None  # mean over nodes reporting it
    draft_acceptance: float | None = None  # pooled: Σaccepted / Σdrafted
    accepted_tokens_per_s: float | None = None  # sum
    full_acceptance_tokens_per_s: float | None = None  # sum
    requests_running: float | None = None  # sum
    requests_waiting: float | None = None  # sum
    util_pct: float | None = None  # mean over GPUs
    idle_fraction: float | None = None  # mean over nodes reporting it


class RollupView(WindowLatency, _RollupViewHead):
    """Sum / mean of engine and GPU figures over a set of nodes (a role pool or all): the
    head's, the pool's latency (WindowLatency), and these."""

    # scoreboard: hit rate and tokens per GPU / per user pooled as the latency is
    prefix_cache_hit_rate: float | None = None
    preemptions_per_s: float | None = None
    kv_transfer_bytes_per_s: float | None = None
    output_tokens_per_s_per_gpu: float | None = None
    full_acceptance_tokens_per_s_per_gpu: float | None = None
    output_tokens_per_s_per_user: float | None = None
    # goodput (monitor/evaluation/goodput.py): the window's share within every [slo] target,
    # as bounds (equal where no bucket straddles a target), what widens them, and $/1M
    # output tokens now, plain and counting only the good ones (low: at the share's high
    # bound; high: at its low bound, None where that is 0)
    goodput_share_low: float | None = None
    goodput_share_high: float | None = None
    goodput_note: str | None = None
    usd_per_million_output_tokens_now: float | None = None
    usd_per_million_good_tokens_low: float | None = None
    usd_per_million_good_tokens_high: float | None = None
    slo_ttft_attainment: float | None = None  # at least, as on EngineView
    slo_itl_attainment: float | None = None
    slo_ttft_attainment_high: float | None = None  # at most
    slo_itl_attainment_high: float | None = None
    # additions: the figures above (all but cost and GPUs, which count every node: a node
    # that does not answer is still paid for) are over the nodes counted, those whose
    # status is ok; fewer counted than expected is a partial sum ("decode 71/96 nodes")
    nodes_counted: int | None = None
    nodes_expected: int | None = None

    @property
    def partial(self) -> bool:
        return (
            self.nodes_counted is not None
            and self.nodes_expected is not None
            and self.nodes_counted < self.nodes_expected
        )


class ReferencePointView(_View):
    label: str
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_user: float
    accounting: str  # "full-acceptance" or "accepted": how the publisher counted


class SharedBlindSpotView(_View):
    """Blind spots every answering node of a peer group shares (same role, read by the same
    sources: a stock dcgm-exporter on every node leaves out ECC): one cluster-level finding
    with its fix, instead of a `blind` verdict on each node (monitor/evaluation/shared_gaps.py)."""

    kinds: list[str]  # the coverage kinds shared ("clock_events", "ecc", …), most important first
    nodes: int  # how many nodes share them (every answering node of the groups below)
    roles: list[str]  # the roles of those nodes
    sources: list[str]  # the sources that read them
    detail: str  # the gaps' own reasons, "; "-joined (as a node's `blind` verdict would say)
    fix: str | None = None  # what to change to see them, where infertop knows; None otherwise
    note: str = ""  # the one line the viewers show: "all 16 decode nodes (read by scrape) blind on …"
    severity: Severity = "warning"  # as a node's `blind` verdict: unknown is never healthy


class ClusterView(_View):
    name: str
    interval_s: float
    total: RollupView
    roles: dict[str, RollupView] = Field(default_factory=dict)
    insecure_ssh: bool = False
    # scoreboard: the points the live decode point is set beside, and the layout's targets
    reference_points: list[ReferencePointView] = Field(default_factory=list)
    reference_source: str | None = None
    slo_ttft_p99_s: float | None = None
    slo_itl_p99_s: float | None = None
    # nodes with an active `blind` verdict: the header says "blind on N nodes"
    blind_nodes: int = 0
    # addition: blind spots shared by every answering node of a peer group, each said once
    # (never null: empty when none, and in records written before it)
    shared_blind_spots: list[SharedBlindSpotView] = Field(default_factory=list)
    # addition: warm-up (monitor.evaluation.judging): nodes not judged yet (being read for
    # the first time, or within their first verdict window), and the seconds until the
    # last of them is; 0 / None once every node has been judged
    judging_nodes: int = 0
    first_verdicts_in_s: float | None = None

    def pool(self, role: str | None) -> RollupView | None:
        """A pool's roll-up by role; "all" is the cluster's total."""
        if role is None:
            return None
        return self.total if role == "all" else self.roles.get(role)


class PhaseSpend(_View):
    phase: str
    spend_usd: float
    seconds: float


class SessionView(_View):
    started_at: str  # ISO 8601, UTC
    elapsed_s: float
    cost_per_hour_usd: float | None
    spend_usd: float | None
    idle_spend_usd: float | None
    budget_usd: float | None
    usd_per_million_output_tokens: float | None
    api_equivalent_usd: float | None
    # additions
    phase: str = "run"
    phase_elapsed_s: float | None = None  # since the current phase began (its mark)
    spend_by_phase: list[PhaseSpend] = Field(default_factory=list)
    accepted_tokens: float | None = None
    requests_finished: float | None = None
    usd_per_request: float | None = None
    usd_per_acceptable_task: float | None = None
    api_break_even_ratio: float | None = None  # spend / API-equivalent
    budget_used_fraction: float | None = None
    budget_exhausted_in_s: float | None = None
    budget_alert: str | None = None  # None, "80%", "100%"
    prompt_tokens: float | None = None
    prompt_cached_tokens: float | None = None  # cache hits among prompt_tokens
    api_prices: str | None = None  # which price table, and its date
    api_cache_note: str | None = None  # how prompt tokens were split hit / miss
    idle_fraction: float | None = None  # idle share of the bill now (cost-weighted)
    accepted_tokens_per_s: float | None = None
    unwatched_s: float = 0.0  # charged time infertop did not see (before start, crashes)
    record_path: str | None = None  # the session record being written, if any
    # $/h ÷ accepted tokens/h right now: the marginal cost, meaningful even when the session
    # figure above is inflated by spend from before infertop started counting tokens
    usd_per_million_output_tokens_now: float | None = None
    # the whole cluster's goodput now, as on ClusterView.total (its $/h, every request)
    goodput_share_low: float | None = None
    goodput_share_high: float | None = None
    goodput_note: str | None = None
    usd_per_million_good_tokens_low: float | None = None
    usd_per_million_good_tokens_high: float | None = None
    # goodput over the stretch the session's $/1M covers (`usd_per_million_span`,
    # `tokens_since` … `tokens_until`): the share within every [slo] target from the bucket
    # counts at the stretch's two edges (monitor/evaluation/stretch_latency.py), and its
    # spend ÷ (its tokens × that share) × 1e6 (low: at the share's high bound)
    span_goodput_share_low: float | None = None
    span_goodput_share_high: float | None = None
    span_goodput_note: str | None = None  # what widens the bounds, or why they are unknown
    span_usd_per_million_good_tokens_low: float | None = None
    span_usd_per_million_good_tokens_high: float | None = None
    # counter steps the ledger did not count, and why (an engine no engine could be)
    notes: list[str] = Field(default_factory=list)
    # scoreboard money (docs/money.md, docs/snapshot.md); the span rule: token figures, $/1M,
    # API-equivalent and the spend ÷ API ratio all cover the same stretch of time
    tokens_since: str | None = None  # ISO 8601, UTC: start of the stretch the tokens cover
    # "reservation": the engines' counters began within it, so the tokens cover all of it;
    # "watched": counted from when infertop first read them (tokens_since), not before
    usd_per_million_span: str | None = None
    span_spend_usd: float | None = None  # spend over that same stretch (what $/1M divides)
    # the stretch's end: the newest moment every engine had been read to (ISO 8601, UTC),
    # and its length, s (None until it has one)
    tokens_until: str | None = None
    span_s: float | None = None
    # the reservation's edges: seconds until it starts (None once it has), whether it has
    # ended (None without an end), and whether the layout bills the hardware past the end
    reservation_starts_in_s: float | None = None
    reservation_ended: bool | None = None
    billed_after_end: bool | None = None
    # output tokens/s the whole cluster must sustain to cost no more than the API's output
    # price in the current price window: cluster $/h ÷ (API $ per output token × 3600)
    breakeven_output_tokens_per_s: float | None = None
    price_window: str | None = None  # "peak" or "off-peak" (API price window now)
    price_window_flips_at: str | None = None  # ISO 8601, UTC: when the window changes
    api_output_usd_per_million: float | None = None  # API output price in this window
    # budget: one figure for every viewer
    budget_label: str | None = None  # "97% of $600", "over by $12.40 of $600"
    budget_over_by_usd: float | None = None  # spend beyond the budget; None while under
    reservation_end: str | None = None  # ISO 8601, UTC, from the layout
    projected_spend_usd: float | None = None  # total at the current $/h to reservation_end
    budget_holds: bool | None = None  # projected_spend_usd <= budget_usd
    # idle: the idle nodes' own $/h; extras (billed to no node) are shown apart, never idle
    idle_cost_per_hour_usd: float | None = None
    extras_cost_per_hour_usd: float | None = None
    # energy, from GPU total-energy counters (NVML or DCGM) over the watched stretch
    energy_kwh: float | None = None
    joules_per_output_token: float | None = None  # over ticks where both were counted
    energy_usd: float | None = None  # owned mode: energy_kwh × PUE × $/kWh
    # the live throughput/interactivity point of the decode pool (scoreboard.py): accepted
    # tokens/s ÷ its GPUs, and ÷ its mean running requests; full acceptance beside it
    output_tokens_per_s_per_gpu: float | None = None
    output_tokens_per_s_per_user: float | None = None
    full_acceptance_tokens_per_s_per_gpu: float | None = None
    live_point_pool: str | None = None  # "decode", "mixed" or "all"
    # the pools the scoreboard's latency pair is read from (scoreboard.py): first tokens
    # where they are made (the prefill pool, when it has any), the next ones from the
    # live point's pool; None when no pool observed any
    ttft_pool: str | None = None
    itl_pool: str | None = None


class VerdictGroupView(_View):
    """Many nodes entering the same verdict at about the same time: one event (a switch
    dropped, a pool went idle), shown as one row and one notification. The per-node
    verdicts stay on the nodes, unchanged (monitor/evaluation/mass_events.py)."""

    key: str  # stable while the group's first member stands: "unreachable@1800000000.000"
    kind: str
    severity: Severity = "warning"
    since: float | None = None  # the first member's start, unix seconds
    nodes: list[str] = Field(default_factory=list)  # in layout order
    summary: str = ""  # "41 nodes unreachable since 02:14:05 UTC: decode-28…decode-68"
    usd_per_hour_at_stake: float | None = None  # summed over the members that know it


class MonitorHealthView(_View):
    """How the monitor itself is keeping up (monitor/health.py): its limits are never the
    cluster's faults, so they are measured and shown as its own. None: not measured."""

    lag_s: float | None = None  # how late the latest ticks ran against their wall-clock slots (max)
    loop_stall_max_s: float | None = None  # the longest event-loop stall lately
    loop_stalled_fraction: float | None = None  # share of the recent time the loop stood still
    cpu_pct: float | None = None  # this process's CPU time over wall time, % of one core
    lagging: bool = False
    reason: str | None = None  # "1.4 s behind, CPU 100 %"
    suggestion: str | None = None  # "try interval_s = 2 or the prom source"
    nodes_excused: int = 0  # nodes judged fresh only because the monitor's stalls were excused
    rounds_late: int = 0  # frames lately drawn before all their readings were in (the monitor was slow)


# a backend further behind than this is worth a line (a scrape interval or two is normal)
BACKEND_BEHIND_SAID_S = 10.0


class BackendView(_View):
    """A metrics backend the monitor reads nodes through (the prom source), and its own
    delay, said once here instead of on every node it serves."""

    name: str  # "prometheus http://prom:9090" (credentials never shown)
    behind_s: float | None = None  # how far its newest sample trailed the wall clock, last round
    # additions
    status: Literal["ok", "down"] = "ok"  # down: it did not answer the last round
    error: str | None = None  # why it is down ("connection refused", "timed out after 5 s")
    since: float | None = None  # unix seconds it went down (JSON: ISO 8601)
    role: Literal["backend", "shard"] = "backend"  # shard: one of several the layout names
    # nodes only it shows, "unknown" while it is down; or, back lately, those it has not
    # scraped since (unknown while they wait for it)
    nodes: int = 0
    detail: str | None = None  # something else worth a line (back lately, duplicate series)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def note(self) -> str | None:
        """The one line every viewer shows when the backend is down, far enough behind to
        matter (a scrape interval or two is normal), or has something to say; else None."""
        if self.status == "down":
            which = "shard" if self.role == "shard" else "backend"
            unseen = f": {self.nodes} node{'s' if self.nodes != 1 else ''} unknown" if self.nodes else ""
            return f"{which} down — {self.name}: {self.error or 'no answer'}{unseen}"
        if self.behind_s is not None and self.behind_s >= BACKEND_BEHIND_SAID_S:
            old = f"{self.behind_s:.0f} s old"
            return f"{self.name}: its newest sample is {old} (nodes are judged against it)"
        return f"{self.name}: {self.detail}" if self.detail else None


class DetailView(_View):
    """How much per-node detail (per-GPU series) the prom source read this tick: a large
    fleet's every node gets its engine and host figures every tick, its per-GPU ones when
    in view, flagged by a verdict, or reached by a rotation (collectors/sources/prom_detail.py)."""

    nodes: int  # nodes whose detail this tick read
    of: int  # nodes the source reads
    every_s: float | None = None  # every node's detail within this; None: every node every tick
    wanted: int = 0  # of `nodes`, those read because in view or flagged
    note: str  # "detail for 124 of 1,250 nodes this tick; every node within 30 s"


class Snapshot(_View):
    """One frame: the whole cluster at `taken_at`."""

    schema_: str = Field(default=SCHEMA, alias="schema")
    taken_at: str  # ISO 8601, UTC
    window_s: float
    cluster: ClusterView
    session: SessionView
    nodes: list[NodeView]
    # additions
    monitor: MonitorHealthView | None = None
    verdict_groups: list[VerdictGroupView] = Field(default_factory=list)
    backends: list[BackendView] = Field(default_factory=list)
    detail: DetailView | None = None  # None: no prom source (every source reads every node whole)
    # what happened lately, oldest first, the cluster's and every node's (at most
    # monitor.evaluation.timeline.MAX_EVENTS): restarts, health flips, verdict onsets …
    timeline: list[TimelineEventView] = Field(default_factory=list)
    # the prefill → decode KV path of each prefill and decode pool pair
    pd_paths: list[PdPathView] = Field(default_factory=list)

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    def to_json_dict(self) -> dict[str, object]:
        """The snapshot as plain JSON data: every NaN or infinity is None (JSON null).
        Values are bounded where samples enter (`collectors.bounds`); this is the last
        guard, so that `json.dumps(..., allow_nan=False)` can never fail on a figure.
        pydantic's JSON writer maps non-finite floats to null (its `model_dump` does not).

        The public JSON also follows two conventions the in-memory model does not need:
        times are ISO 8601 strings like `taken_at` (a verdict's `since`), and money is
        rounded to the cent (`1354.5`, never `1354.4959999999996`)."""
        data: dict[str, object] = json.loads(self.model_dump_json(by_alias=True))
        return _public_json(data)


def _iso_utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()  # the form of `taken_at`


# session totals counted in whole tokens / requests (the ledger sums them as floats), and
# the requests running and waiting (an engine's gauges count requests; a pool's are their
# sum); a mean over a window (`requests_running_mean`) is no count and keeps its fraction
_COUNT_KEYS = frozenset({
    "accepted_tokens", "requests_finished", "prompt_tokens", "prompt_cached_tokens",
    "requests_running", "requests_waiting",
})


# epoch seconds in memory, ISO 8601 in the public JSON
_EPOCH_KEYS = frozenset({
    "since", "at", "window_first_reading_at", "window_last_reading_at", "log_window_start_at",
    "log_window_end_at",
})


def _public_json(value: Any, key: str = "") -> Any:
    """Money to the cent, counts as integers, epoch `since` as ISO 8601, recursively."""
    if isinstance(value, dict):
        return {k: _public_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_public_json(v, key) for v in value]
    if isinstance(value, float):
        if key in _EPOCH_KEYS:
            return _iso_utc(value)
        if key.endswith("_usd") or key.startswith(("usd_per_hour", "usd_per_million")):
            return round(value, 2)
        if key.startswith("usd_per_"):  # per request / task: can be well under a cent
            return round(value, 6)
        if key in _COUNT_KEYS:
            return round(value)
    return value


_JSON_LOCK = threading.Lock()
_last_json: tuple[Snapshot, bytes] | None = None


def snapshot_json(snapshot: Snapshot) -> bytes:
    """The snapshot as its compact JSON (fields at their default left out: pydantic
    fills them back on reading), written once however many ask: the session record (in
    its writer thread) and the viewers' channel each need the newest frame's, ~5 ms of
    CPU a tick at 128 nodes. The newest one is kept; the lock makes the second asker
    wait for the first's text instead of writing it again."""
    global _last_json
    with _JSON_LOCK:
        last = _last_json
        if last is not None and last[0] is snapshot:
            return last[1]
        text = snapshot.model_dump_json(by_alias=True, exclude_defaults=True).encode()
        _last_json = (snapshot, text)
        return text


EngineView.model_rebuild()
VerdictView.model_rebuild()
