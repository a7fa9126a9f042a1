"""The typed samples every source produces.

A `NodeSample` is one reading of one node by one source at one instant. It holds
gauges as they were read and counters as raw cumulative values: rates are derived
later, over a window, by `collectors.rates`, so that a counter reset is handled in
one place. `None` always means "unknown" (not read, not supported, not reported);
never substitute 0 for it.

A part that a source does not cover is `None` as a whole (e.g. a scrape of the engine
alone has `gpus=None`), while a part that the source covers but found empty is an
empty list (e.g. a node without an NVIDIA driver has `gpus=[]`).
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from infertop.collectors.safe_text import inert_text, redact_text, redact_url

AcceleratorKind = Literal["gpu", "npu"]
NicKind = Literal["ethernet", "infiniband", "roce", "bond", "npu-roce", "loopback", "other"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


ActivitySource = Literal["gpm", "dcgm"]


class GpuProcess(_Frozen):
    """A process holding a GPU (NVML's compute / graphics process list + /proc)."""

    pid: int
    user: str | None = None
    command: str | None = None  # one line, capped
    cgroup: str | None = None  # the container's cgroup path, where /proc shows it
    gpu_mem_bytes: int | None = None

    @field_validator("user", "command", "cgroup")
    @classmethod
    def _inert(cls, text: str | None) -> str | None:
        # a node's process table is anyone's text: one printable line, bounded, no secrets
        return None if text is None else redact_text(inert_text(text, 160))


class GpuSample(_Frozen):
    """One accelerator (NVIDIA GPU or Ascend NPU). Gauges as read; counters cumulative."""

    index: int
    kind: AcceleratorKind = "gpu"
    name: str | None = None
    uuid: str | None = None
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    # which NVML memory call gave the two above: 2 (driver-reserved memory apart, as
    # nvidia-smi shows it) or 1 (older drivers: reserved memory counted as used)
    mem_info_version: int | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    # NVML clock-event reasons bitmask (SwPowerCap 0x4, HwSlowdown 0x8, SwThermal 0x20,
    # HwThermal 0x40, PowerBrake 0x80); None where unsupported.
    clock_event_reasons: int | None = None
    xid_last: int | None = None
    ecc_uncorrected_total: int | None = None  # counter
    energy_j_total: float | None = None  # counter
    healthy: bool | None = None  # False = GPU lost / NPU unhealthy
    error: str | None = None  # e.g. "GPU is lost"
    # NVLink (NVIDIA) or HCCS (Ascend) chip-to-chip links; None where not present.
    nvlink_links_total: int | None = None
    nvlink_links_up: int | None = None
    nvlink_tx_bytes_total: float | None = None  # counter
    nvlink_rx_bytes_total: float | None = None  # counter
    nvlink_errors_total: int | None = None  # counter
    # NVLink throughput as a rate read directly (dcgm-exporter's DCGM_FI_PROF_NVLINK_*_BYTES),
    # used where no cumulative counter is available
    nvlink_tx_bytes_per_s: float | None = None
    nvlink_rx_bytes_per_s: float | None = None
    # NVLink throughput of both directions together, where the source does not split them
    # (dcgm-exporter's default DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, payload only)
    nvlink_bytes_per_s: float | None = None
    # real compute activity over the last interval, 0–100 (NVML GPM, or dcgm-exporter's
    # DCGM_FI_PROF_* ratios ×100): what utilisation cannot tell — a kernel resident and
    # spinning reads util ~100 % with SM activity near 0
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    activity_source: ActivitySource | None = None
    # the processes holding this GPU; None: not read (an exporter, no NVML)
    processes: list[GpuProcess] | None = None


PAUSE_PRIORITY_KEY = re.compile(r"^(rx|tx)[0-7]$")


class NicSample(_Frozen):
    """One network port: an Ethernet interface, an IB/RoCE port, a bond, an NPU RoCE port."""

    name: str
    kind: NicKind = "other"
    state: str | None = None  # "up", "down", "lowerlayerdown", "dormant", …
    speed_gbps: float | None = None  # negotiated rate
    rx_bytes_total: float | None = None  # counter
    tx_bytes_total: float | None = None  # counter
    xmit_wait_total: float | None = None  # counter (IB port_xmit_wait)
    link_downed_total: float | None = None  # counter
    errors_total: float | None = None  # counter (symbol errors, RoCE error packets, …)
    # traffic as a rate read directly, where the source has no byte counter (npu-exporter's
    # npu_chip_info_bandwidth_rx/tx gauges); a counter's rate wins where both are known
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None
    # node_exporter's per-port error counters (netdev *_errs / *_drop; IB port_errors_received,
    # link_error_recovery, local_link_integrity_errors), each a counter
    rx_errors_total: float | None = None
    tx_errors_total: float | None = None
    rx_drops_total: float | None = None
    tx_drops_total: float | None = None
    link_recoveries_total: float | None = None  # IB: the link recovered from an error state
    link_integrity_errors_total: float | None = None  # IB: local physical errors over threshold
    # RoCE congestion: pause frames (PFC, every priority, and global pause; node_exporter's
    # ethtool collector from mlx5's rx/tx_prioN_pause, rx/tx_pause_ctrl_phy) and congestion
    # notifications (mlx5 hw_counters np_cnp_sent: sent as the notification point, i.e.
    # this port received ECN-marked packets; rp_cnp_handled: handled as the reaction point,
    # i.e. this port was told to slow down), each a counter
    rx_pause_total: float | None = None
    tx_pause_total: float | None = None
    # the same PFC pause frames per priority, keyed "rx3" / "tx3" (mlx5 `rx_prio3_pause`:
    # only the priorities with PFC on are served), counters; None: not served per priority
    pause_by_priority_total: dict[str, float] | None = None
    cnp_sent_total: float | None = None
    cnp_handled_total: float | None = None
    # ECN-marked packets received (mlx5 hw_counters np_ecn_marked_roce_packets on the RDMA
    # port; the netdev's rx_ecn_mark in ethtool, node_ethtool_received_ecn_mark), a counter
    ecn_marked_total: float | None = None
    # IB physical state ("link_up", "polling", "disabled", "link_error_recover", …)
    physical_state: str | None = None
    netdev: str | None = None  # the Ethernet device of an IB/RoCE port, when known
    members: list[str] | None = None  # bond members
    members_up: int | None = None  # bond members whose MII status is up
    accelerator_index: int | None = None  # an NPU's own RoCE port belongs to NPU n

    @field_validator("pause_by_priority_total")
    @classmethod
    def _sane_priorities(cls, counts: dict[str, float] | None) -> dict[str, float] | None:
        # a probe may send anything: only "rx0".."tx7" with finite counters
        if counts is None:
            return None
        kept = {k: v for k, v in list(counts.items())[:16]
                if isinstance(k, str) and PAUSE_PRIORITY_KEY.match(k) and 0 <= v <= 2.0**64}
        return kept or None

    @property
    def is_up(self) -> bool | None:
        return port_is_up(self.state)


def port_is_up(state: str | None) -> bool | None:
    """The one rule for "this port is up": sysfs `up`, IB `ACTIVE`, an exporter's
    `unknown_up`; any other known state is down; no state is unknown (None)."""
    if state is None:
        return None
    return state.lower() in ("up", "active", "unknown_up")


class HostSample(_Frozen):
    cpu_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    load1: float | None = None


EngineSourceKind = Literal["endpoint", "log"]


class EngineSample(_Frozen):
    """Canonical engine quantities. Counters cumulative, gauges as read."""

    source: EngineSourceKind = "endpoint"
    profile: str | None = None
    # counters
    steps_total: float | None = None
    drafts_total: float | None = None
    draft_tokens_total: float | None = None
    accepted_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    prompt_tokens_total: float | None = None
    prompt_cached_tokens_total: float | None = None
    requests_finished_total: float | None = None  # ended normally (vLLM: stop / length)
    requests_aborted_total: float | None = None  # vLLM: abort / error / repetition
    ttft_seconds_sum: float | None = None
    ttft_seconds_count: float | None = None
    itl_seconds_sum: float | None = None
    itl_seconds_count: float | None = None
    # steps counted per data-parallel engine (vLLM `engine`, SGLang `dp_rank`, a log's
    # engine id), where the source tells engines apart: the node's decode steps/s is the
    # fastest engine's (docs/engines.md); `steps_total` is their mean
    steps_by_engine_total: dict[str, float] | None = None
    # scoreboard counters (collectors.pages.histograms)
    preemptions_total: float | None = None
    prefix_cache_queries_total: float | None = None  # tokens looked up (local cache)
    prefix_cache_hits_total: float | None = None  # tokens found (local cache)
    external_prefix_cache_queries_total: float | None = None  # through a KV connector
    external_prefix_cache_hits_total: float | None = None
    kv_transfer_bytes_total: float | None = None  # prefill → decode KV bytes
    kv_transfer_failures_total: float | None = None
    kv_transfer_expired_total: float | None = None  # NIXL: requests whose KV expired (prefill side)
    kv_transfer_seconds_sum: float | None = None
    kv_transfer_seconds_count: float | None = None
    expert_balancedness_sum: float | None = None  # SGLang EPLB summary (1 = even load)
    expert_balancedness_count: float | None = None
    # a log source's own clock: the seconds its throughput lines cover (each line its
    # interval, ÷ the DP engines printing them; an idle stretch the engine printed nothing
    # for counts as covered at zero throughput). Tokens/s from a log are Δtokens over Δ
    # this, as the log's own lines give them, not over the monitor's read times (issue 33)
    log_stats_seconds_total: float | None = None
    # latency histograms: "ttft" / "itl" / "e2e" / "queue" → cumulative (le, count)
    # buckets summed over the node's engines, +inf last
    latency_buckets: dict[str, tuple[tuple[float, float], ...]] | None = None
    # gauges
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None  # 0–1
    # speculative decoding as the engine itself reports it, over its own last stats
    # interval (SGLang's spec_accept_rate / spec_accept_length gauges): used where no
    # draft / accepted counters exist. Acceptance 0–1; length includes the bonus token.
    spec_accept_rate: float | None = None
    spec_accept_length: float | None = None
    # accepted draft tokens per draft position 0..k-1, cumulative (vLLM's
    # spec_decode_num_accepted_tokens_per_pos, summed over engines: collectors.pages.draft_positions)
    accepted_tokens_by_position_total: tuple[float, ...] | None = None
    # when the token counters began (unix s): their `_created` sample, else the process
    # start; a counter born after the reservation start counted only this reservation
    counters_started_at: float | None = None
    kv_transfer_speed_bytes_per_s: float | None = None  # SGLang: latest transfers' speed
    kv_transfer_latency_s: float | None = None  # SGLang: latest transfers' latency
    # when the figures came from a log: the time of the newest parsed line
    log_last_line_at: float | None = None
    # the stamp the newest throughput line carries (unix s, read as the node's local time):
    # the end of the span of the log's own clock its counters cover
    log_stats_line_at: float | None = None
    log_lines_skipped_total: int | None = None
    # each data-parallel engine of the node on its own (collectors.pages.engine_ranks), where the
    # page tells engines apart; the fields above stay the node's roll-up
    ranks: list[EngineRankSample] | None = None
    # the engine's settings from its info gauges ("cache.block_size" → "16"; page text,
    # bounded: collectors.pages.engine_info) and its own health gauge (vllm:engine_healthy)
    settings: dict[str, str] | None = None
    healthy: bool | None = None

    @field_validator("settings")
    @classmethod
    def _bounded_settings(cls, settings: dict[str, str] | None) -> dict[str, str] | None:
        # a probe may send anything: at most 64 settings, keys and values cut short
        if settings is None:
            return None
        return {str(k)[:64]: str(v)[:120] for k, v in list(settings.items())[:64]} or None

    @field_validator("accepted_tokens_by_position_total")
    @classmethod
    def _sane_positions(cls, counts: tuple[float, ...] | None) -> tuple[float, ...] | None:
        # a probe may send anything: at most 32 positions of finite counts, else unknown
        if counts is None or not 0 < len(counts) <= 32:
            return None
        if not all(math.isfinite(c) and 0 <= c <= 2.0**64 for c in counts):
            return None
        return counts

    @field_validator("ranks")
    @classmethod
    def _bounded_ranks(cls, ranks: list[EngineRankSample] | None) -> list[EngineRankSample] | None:
        # a probe's reading may hold any list (a log's ranks travel in it): at most 64
        return None if ranks is None else ranks[:64] or None

    @field_validator("steps_by_engine_total")
    @classmethod
    def _sane_engines(cls, steps: dict[str, float] | None) -> dict[str, float] | None:
        # a page or a probe may send anything: finite counters of at most 4096 engines
        if steps is None:
            return None
        kept = {k[:64]: v for k, v in list(steps.items())[:MAX_ENGINES] if 0 <= v <= 2.0**64}
        return kept or None


MAX_ENGINES = 4096


class EngineRankSample(_Frozen):
    """One data-parallel engine of a node (vLLM `engine`, SGLang `dp_rank`), read alone."""

    key: str  # the labels that tell it apart: "engine=3", "dp_rank=1"
    dp_rank: int | None = None  # the label's value, where it is a number
    # SGLang's `tp_rank` values seen under this engine: where the engine itself says which
    # GPUs it runs on (the monitor maps them onto the node's GPU indices); None: not said
    tp_ranks: list[int] | None = None
    engine: EngineSample


EngineSample.model_rebuild()


PageKind = Literal["engine", "dcgm-exporter", "node_exporter", "npu-exporter", "exporter"]


class PageOutcome(_Frozen):
    """How one page of a node read on this poll (an engine or exporter URL).

    A failed page is not an error of the node while its other pages answer; it is what
    makes the parts it fills unknown, and the coverage evaluation quotes it as the reason
    ("links unknown: node_exporter page failed (cannot connect to …)")."""

    kind: PageKind
    url: str  # redacted: never a password or token
    ok: bool
    error: str | None = None  # one line, when not ok
    # the sample parts this page fills ("gpus", "nics", "engine"): what it gave when it
    # last read right, else what its kind usually gives; empty when not known
    parts: tuple[str, ...] = ()

    @field_validator("url")
    @classmethod
    def _redact_url(cls, url: str) -> str:
        return redact_url(url)

    @field_validator("error")
    @classmethod
    def _redact_error(cls, error: str | None) -> str | None:
        return None if error is None else redact_text(error)


class NodeSample(_Frozen):
    """One reading of one node by one source."""

    node: str
    source: str  # "local", "ssh", "scrape", "prom", "log", "demo", …
    taken_at: float  # unix seconds (UTC)
    gpus: list[GpuSample] | None = None
    nics: list[NicSample] | None = None
    engine: EngineSample | None = None
    host: HostSample | None = None
    notes: list[str] = Field(default_factory=list)
    # What this source could not see on this node although it covers the part, and why:
    # a capability key ("clock_events", "nvlink", "ecc", "nic_errors", "npu_link_speed", …)
    # mapped to a one-line reason, e.g. {"clock_events": "dcgm-exporter does not collect
    # DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}. A blind spot is a finding, not silence: the
    # coverage evaluation reads this to say what is unknown and why.
    unseen: dict[str, str] = Field(default_factory=dict)
    # each page this source read for this node on this poll (scrape, or the probe's engine
    # fetch): a failed one is the reason the parts it fills are unknown
    pages: list[PageOutcome] = Field(default_factory=list)
    # Set when this source failed for this node; the other parts are then None.
    error: str | None = None
    # Read from a metrics backend (Prometheus, VictoriaMetrics): how far the newest sample
    # that backend held trailed the wall clock when this was read (its own delay, e.g.
    # VictoriaMetrics' -search.latencyOffset, or a Prometheus behind on its scrapes). The
    # node's age is judged past it: the backend's delay is the backend's, not the node's.
    # The prom source adds the target's place in the backend's scrape cycle (how far its
    # scrape trailed the backend's newest, at most one interval: collectors/sources/prom.py).
    backend_behind_s: float | None = None

    @field_validator("notes")
    @classmethod
    def _redact_notes(cls, notes: list[str]) -> list[str]:
        # the last net for secrets: a source's message may quote a URL or an exception
        # that holds one; what a sample says is shown, exported and recorded
        return [redact_text(n) for n in notes]

    @field_validator("unseen")
    @classmethod
    def _redact_unseen(cls, unseen: dict[str, str]) -> dict[str, str]:
        return {k: redact_text(v) for k, v in unseen.items()}

    @field_validator("error")
    @classmethod
    def _redact_error(cls, error: str | None) -> str | None:
        return None if error is None else redact_text(error)

    @property
    def ok(self) -> bool:
        return self.error is None


ENGINE_COUNTER_FIELDS: tuple[str, ...] = (
    "steps_total",
    "drafts_total",
    "draft_tokens_total",
    "accepted_tokens_total",
    "generation_tokens_total",
    "prompt_tokens_total",
    "prompt_cached_tokens_total",
    "requests_finished_total",
    "requests_aborted_total",
    "ttft_seconds_sum",
    "ttft_seconds_count",
    "itl_seconds_sum",
    "itl_seconds_count",
)
ENGINE_GAUGE_FIELDS: tuple[str, ...] = (
    "requests_running", "requests_waiting", "kv_cache_usage", "spec_accept_rate", "spec_accept_length",
)
