"""PromQL for the `prom` source: the queries of one tick, and their results → samples.

Pure (no I/O) so that it is tested with plain data. Every query aggregates on the
Prometheus server, grouped by one synthetic label, `infertop_node`, made from the
layout's node label(s) with `label_replace` (the `:port` of `instance` stripped, so
the engine on :8000, dcgm-exporter on :9400 and node_exporter on :9100 of one host land
on one node). What one tick pulls:

- engine (one series per node and quantity): counters summed per node as raw cumulative
  values, so that fleet state rates them reset-aware exactly as it rates every other
  source; gauges summed (requests) or averaged (KV usage).
- node_exporter (one series per node and port): NIC / IB port counters and state, host
  memory and load.
- dcgm-exporter (one series per GPU and quantity): per-GPU figures are what the node
  screen and the idle fraction need, so they are O(GPUs); on a large fleet a tick reads
  them for some nodes only, to keep it cheap (collectors/sources/prom_detail.py).

Each group also asks for `timestamp()` of one of its series: samples are stamped with
the time Prometheus scraped them, not the time infertop asked, so that rates derived
from Prometheus match rates derived by scraping the exporters directly.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from infertop.collectors.bounds import whole
from infertop.collectors.pages.dcgm import ACTIVITY_FACTOR, ACTIVITY_METRICS, NVLINK_TOTAL_BYTES_PER_UNIT
from infertop.collectors.pages.draft_positions import (
    PER_POSITION_NAMES,
    POSITION_FIELD,
    POSITION_LABEL,
    accepted_by_position,
)
from infertop.collectors.pages.engine_info import (
    HEALTH_GAUGES,
    INFO_GAUGES,
    VALUE_SETTINGS,
    settings_from_labels,
    settings_from_values,
)
from infertop.collectors.pages.histograms import LATENCY_HISTOGRAMS, SCOREBOARD_SCALARS, bucket_bound
from infertop.collectors.pages.node_exporter import ib_physical_state
from infertop.collectors.pages.profiles import ENGINE_LABELS, CustomProfiles, ProfileError, resolve_profile
from infertop.collectors.probe.host import port_state
from infertop.collectors.sample import (
    ENGINE_COUNTER_FIELDS,
    ENGINE_GAUGE_FIELDS,
    EngineSample,
    GpuSample,
    HostSample,
    NicSample,
    NodeSample,
)
from infertop.collectors.sources.prom_ranks import RANK_KEY, rank_samples, rank_subkeys
from infertop.collectors.virtual_nics import VIRTUAL_NIC_REGEX

NODE = "infertop_node"
# full-match regex (label_replace anchors it): the host without an optional `:port`
STRIP_PORT_RE = "(.+?)(?::[0-9]+)?"
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# virtual interfaces that would only clutter a node's port list: the rule every source
# applies (collectors.virtual_nics), and `lo`. Unlike a page read directly, a layout's
# expected port named like plumbing is not kept here (one matcher serves every node).
VIRTUAL_NICS = "lo|" + VIRTUAL_NIC_REGEX


# several engines on one node (data parallel): KV usage is averaged, the rest summed, and
# steps are summed per engine then averaged over engines (they step in lockstep) — the
# same aggregation collectors/pages/profiles.py applies to a scraped page
_ENGINE_AVG = frozenset({"kv_cache_usage", "spec_accept_rate", "spec_accept_length"})
# read from a page only to weigh other figures (collectors/pages/profiles.py), not a sample field
_ENGINE_HELPERS = frozenset({"spec_verify_calls"})
_ENGINE_STEPS = "steps_total"
_ENGINE_STEPS_BY_ENGINE = "steps_by_engine"

_MIB = 1024 * 1024


def profile_metrics(
    profile_names: Iterable[str] = (), custom: CustomProfiles | None = None
) -> dict[str, tuple[str, ...]]:
    """EngineSample field → metric names (first present wins) over the profiles in use.

    The bundled vLLM and SGLang names are always included (a Prometheus often holds both
    kinds of engine) with the layout's own profiles first. Names that are not valid
    metric names are dropped: they would otherwise be PromQL text taken from the layout.
    """
    merged: dict[str, list[str]] = {}
    for name in dict.fromkeys([*profile_names, "vllm", "sglang"]):
        try:
            profile = resolve_profile(name, custom)
        except ProfileError:
            continue  # the layout loader reports bad profiles; here they only add names
        pairs = [(f, n) for f, names in profile.scalars.items() for n in names]
        for hist, bases in profile.histograms.items():
            pairs += [(f"{hist}{sfx}", f"{b}{sfx}") for b in bases for sfx in ("_sum", "_count")]
        for field_name, metric in pairs:
            names = merged.setdefault(field_name, [])
            if _METRIC_NAME.fullmatch(metric) and metric not in names and metric not in _PROM_SKIP:
                names.append(metric)
    # the scoreboard's counters (engine-prefixed names, read on every profile)
    for field_name, (scoreboard_names, _) in SCOREBOARD_SCALARS.items():
        merged.setdefault(field_name, []).extend(scoreboard_names)
    return {k: tuple(v) for k, v in merged.items() if v and k not in _ENGINE_HELPERS}


# labels of copies of one figure (SGLang's TP ranks; see collectors/pages/profiles.py)
_REPLICA_LABELS = ("tp_rank", "moe_ep_rank", "pp_rank")
# PromQL's `a or b` is a union of series with different label sets, not "the first name
# present": a name that has labelled series beside another name's would be added to it
_PROM_SKIP = frozenset({"sglang:realtime_tokens_total"})


def profile_matchers(
    profile_names: Iterable[str] = (), custom: CustomProfiles | None = None
) -> dict[tuple[str, str], str]:
    """(field, metric name) → label matchers from the profiles' series filters (vLLM's
    finished_reason, SGLang's decode modes, `priority=""` totals). `label=~""` also
    matches a series without the label, as the filters mean."""
    out: dict[tuple[str, str], str] = {}
    for name in dict.fromkeys([*profile_names, "vllm", "sglang"]):
        try:
            profile = resolve_profile(name, custom)
        except ProfileError:
            continue
        for field_name, names in profile.scalars.items():
            for metric in names:
                keep = profile.filter_for(field_name, metric)
                if keep and (field_name, metric) not in out:
                    out[(field_name, metric)] = ", ".join(
                        f'{label}=~"{"|".join(sorted(keep[label]))}"' for label in sorted(keep)
                    )
    return out


# the scoreboard's latency histograms: cumulative buckets summed per node and `le`
LATENCY_KEY = "latency:"
# Info gauges (vLLM's `vllm:cache_config_info`: settings as labels, collectors/pages/engine_info.py)
# are read raw, each series's labels kept as its sub-key ("label=value", sorted). Prometheus
# adds its target labels (instance, job, pod, namespace, …) to every series; those are the
# labels an engine's own series carries too (LABELS_BASE: vllm:num_requests_running), so a
# setting is a label only the info gauge has.
LABELS_KEY = "labels:"
LABELS_BASE = f"{LABELS_KEY}base"
_LABELS_BASE_METRIC = "vllm:num_requests_running"
_HEALTH_KEY = "engine_healthy"
# accepted draft tokens per draft position, summed per node (and engine) and `position`
POSITIONS_KEY = POSITION_FIELD
_MAX_INFO_SERIES = 64  # per node and gauge: a node has at most a few dozen engines


@dataclass(frozen=True)
class Query:
    """One PromQL instant/range query and where its result goes."""

    tier: str  # engine | gpu | node
    key: str  # the field it fills ("generation_tokens_total", "util_pct", "timestamp", …)
    promql: str


def is_latency_key(key: str) -> bool:
    """A latency histogram's buckets: the node's (`latency:…`) or an engine's (`rank:latency:…`)."""
    return key.removeprefix(RANK_KEY).startswith(LATENCY_KEY)


def is_latency(query: Query) -> bool:
    return query.tier == "engine" and is_latency_key(query.key)


def is_rank_latency(query: Query) -> bool:
    """The buckets of one data-parallel engine's latency histogram (read on small fleets only)."""
    return is_latency(query) and query.key.startswith(RANK_KEY)


# the throttled verdict reads dcgm-exporter's clock-event reasons; where Prometheus has
# none for a node, the node is blind on throttling and this says why
CLOCK_REASONS_UNSEEN = (
    "Prometheus has no DCGM_FI_DEV_CLOCKS_EVENT_REASONS series for this node "
    "(dcgm-exporter does not collect it by default)"
)


@dataclass(frozen=True)
class QueryBuilder:
    node_labels: tuple[str, ...] = ("instance",)
    strip_port: bool = True
    selector: str | None = None
    engine_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=profile_metrics)
    engine_matchers: Mapping[tuple[str, str], str] = field(default_factory=profile_matchers)
    # labels in which copies of one series differ (HA replicas, two jobs scraping the same
    # targets): every series is read as the `max` of its copies, never their sum
    replica_labels: tuple[str, ...] = ()

    def sel(self, metric: str, extra: str = "", raw: bool = False) -> str:
        """`metric` with the selector's matchers and `extra`, its copies collapsed (unless
        `raw`: inside `timestamp()`, which must see the series' own samples)."""
        matchers = ", ".join(m for m in (self.selector, extra) if m)
        expr = f"{metric}{{{matchers}}}" if matchers else metric
        if self.replica_labels and not raw:
            return f"max without ({', '.join(self.replica_labels)}) ({expr})"
        return expr

    def duplicates(self, label: str) -> str:
        """The scrape targets that come more than once, differing only in `label` (each
        target's `up` series: one a target and job)."""
        return self.with_node(f"count without ({label}) ({self.sel('up', raw=True)}) > 1")

    def with_node(self, expr: str) -> str:
        """Add `infertop_node` from the node labels; the first label listed wins."""
        regex = STRIP_PORT_RE if self.strip_port else "(.+)"
        out = expr
        for label in reversed(self.node_labels):
            out = f'label_replace({out}, "{NODE}", "$1", "{label}", "{regex}")'
        return out

    def _alts(self, names: Sequence[str], extra: str = "", wrap: str = "") -> str:
        parts = [f"{wrap}({self.sel(n, extra, raw=True)})" if wrap else self.sel(n, extra) for n in names]
        return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"

    def agg(self, op: str, expr: str, by: Sequence[str] = ()) -> str:
        labels = ", ".join((NODE, *by))
        return f"{op} by ({labels}) ({self.with_node(expr)})"

    def _engine_alts(self, key: str, names: Sequence[str]) -> str:
        """The names of one field with their label filters, SGLang's TP-rank copies merged
        into one series (`max`: copies are equal), as collectors/pages/profiles.py does."""
        parts = [self.sel(n, self.engine_matchers.get((key, n), "")) for n in names]
        alts = parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
        return f"max without ({', '.join(_REPLICA_LABELS)}) ({alts})"

    def engine(self) -> list[Query]:
        out = []
        for key, names in self.engine_metrics.items():
            if key == _ENGINE_STEPS:
                per_engine = self.agg("sum", self._engine_alts(key, names), ENGINE_LABELS)
                out.append(Query("engine", key, f"avg by ({NODE}) ({per_engine})"))
                # and per engine: the node's decode steps/s is its fastest engine's
                out.append(Query("engine", _ENGINE_STEPS_BY_ENGINE, per_engine))
            else:
                op = "avg" if key in _ENGINE_AVG else "sum"
                alts = self._engine_alts(key, names)
                if key in _ENGINE_AVG - {"kv_cache_usage"}:
                    alts = f"({alts} > 0)"  # SGLang writes 0 until it has a figure
                out.append(Query("engine", key, self.agg(op, alts)))
        for name, bases in LATENCY_HISTOGRAMS.items():
            buckets = self.agg("sum", self._alts([f"{b}_bucket" for b in bases]), ("le",))
            out.append(Query("engine", f"{LATENCY_KEY}{name}", buckets))
        positions = self.agg("sum", self._alts(PER_POSITION_NAMES), (POSITION_LABEL,))
        out.append(Query("engine", POSITIONS_KEY, positions))
        for gauge in (*INFO_GAUGES, *VALUE_SETTINGS):
            out.append(Query("engine", f"{LABELS_KEY}{gauge}", self.with_node(self.sel(gauge))))
        out.append(Query("engine", LABELS_BASE, self.with_node(self.sel(_LABELS_BASE_METRIC))))
        # the engine's own word on its health: unhealthy when any engine says so
        out.append(Query("engine", _HEALTH_KEY, self.agg("min", self._alts(HEALTH_GAUGES))))
        stamp = [*self.engine_metrics.get("generation_tokens_total", ()),
                 *self.engine_metrics.get("requests_running", ())]
        out.append(Query("engine", "timestamp", self.agg("max", self._alts(stamp, wrap="timestamp"))))
        return out + self.engine_ranks()

    def engine_ranks(self) -> list[Query]:
        """Every engine figure again per data-parallel engine (vLLM `engine`, SGLang
        `dp_rank`), aggregated as the node's (collectors/sources/prom_ranks.py); steps per engine
        are the node's `steps_by_engine` already. A node of one unlabelled engine gets one
        empty-labelled series each, dropped as no rank."""
        out = []
        for key, names in self.engine_metrics.items():
            if key == _ENGINE_STEPS:
                continue
            alts = self._engine_alts(key, names)
            if key in _ENGINE_AVG - {"kv_cache_usage"}:
                alts = f"({alts} > 0)"
            op = "avg" if key in _ENGINE_AVG else "sum"
            out.append(Query("engine", f"{RANK_KEY}{key}", self.agg(op, alts, ENGINE_LABELS)))
        for name, bases in LATENCY_HISTOGRAMS.items():
            buckets = self.agg("sum", self._alts([f"{b}_bucket" for b in bases]), (*ENGINE_LABELS, "le"))
            out.append(Query("engine", f"{RANK_KEY}{LATENCY_KEY}{name}", buckets))
        positions = self.agg("sum", self._alts(PER_POSITION_NAMES), (*ENGINE_LABELS, POSITION_LABEL))
        out.append(Query("engine", f"{RANK_KEY}{POSITIONS_KEY}", positions))
        return out

    def gpu(self) -> list[Query]:
        util = "(" + " or ".join(
            [self.sel("DCGM_FI_DEV_GPU_UTIL"), f"100 * {self.sel('DCGM_FI_DEV_GPU_UTIL_RATIO')}"]
        ) + ")"
        by = ("gpu",)
        # the model name comes from a label: grouping by it keeps one series per GPU
        return [
            Query("gpu", "util_pct", self.agg("max", util, ("gpu", "modelName"))),
            Query("gpu", "mem_used_mib", self.agg("max", self.sel("DCGM_FI_DEV_FB_USED"), by)),
            # total = used + free, added here: a binary operator on the server costs more
            Query("gpu", "mem_free_mib", self.agg("max", self.sel("DCGM_FI_DEV_FB_FREE"), by)),
            # the framebuffer the driver keeps: part of the total, as the direct read counts it
            # (collectors.pages.dcgm); FB_TOTAL, where collected, is the total itself
            Query("gpu", "mem_reserved_mib", self.agg("max", self.sel("DCGM_FI_DEV_FB_RESERVED"), by)),
            Query("gpu", "mem_total_mib", self.agg("max", self.sel("DCGM_FI_DEV_FB_TOTAL"), by)),
            Query("gpu", "power_w", self.agg("max", self.sel("DCGM_FI_DEV_POWER_USAGE"), by)),
            Query("gpu", "temp_c", self.agg("max", self.sel("DCGM_FI_DEV_GPU_TEMP"), by)),
            Query("gpu", "sm_clock_mhz", self.agg("max", self.sel("DCGM_FI_DEV_SM_CLOCK"), by)),
            Query("gpu", "xid_last", self.agg(
                "max", self._alts(("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR")), by)),
            Query("gpu", "energy_mj_total", self.agg(
                "max", self.sel("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), by)),
            # the default CSV's NVLink field: a rate in 1000-KiB/s units (collectors.pages.dcgm)
            Query("gpu", "nvlink_total", self.agg(
                "max", self.sel("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"), by)),
            Query("gpu", "clock_event_reasons", self.agg("max", self._alts(
                ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")), by)),
            Query("gpu", "ecc_dbe", self.agg("max", self._alts(
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL")), by)),
            # profiling (DCP) ratios: real compute activity beside util, the idle verdict's
            # basis where a GPU reports it (monitor/evaluation/activity.py)
            *(Query("gpu", key, self.agg("max", self.sel(metric), by))
              for key, metric in ACTIVITY_METRICS.items()),
            Query("gpu", "timestamp", self.agg(
                "max", self._alts(("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"), wrap="timestamp"))),
        ]

    def node(self) -> list[Query]:
        real = f'device!~"{VIRTUAL_NICS}"'
        eth, ib = ("device",), ("device", "port")
        return [
            Query("node", "eth_rx", self.agg("sum", self.sel("node_network_receive_bytes_total", real), eth)),
            Query("node", "eth_tx", self.agg(
                "sum", self.sel("node_network_transmit_bytes_total", real), eth)),
            Query("node", "eth_up", self.agg("max", self.sel("node_network_up", real), eth)),
            Query("node", "eth_carrier", self.agg("max", self.sel("node_network_carrier", real), eth)),
            Query("node", "eth_speed", self.agg("max", self.sel("node_network_speed_bytes", real), eth)),
            Query("node", "ib_rx", self.agg(
                "sum", self.sel("node_infiniband_port_data_received_bytes_total"), ib)),
            Query("node", "ib_tx", self.agg(
                "sum", self.sel("node_infiniband_port_data_transmitted_bytes_total"), ib)),
            Query("node", "ib_state", self.agg("max", self.sel("node_infiniband_state_id"), ib)),
            Query("node", "ib_rate", self.agg(
                "max", self.sel("node_infiniband_rate_bytes_per_second"), ib)),
            Query("node", "ib_wait", self.agg(
                "sum", self.sel("node_infiniband_port_transmit_wait_total"), ib)),
            # per-port error counters (node_exporter 1.12.1 names; see collectors.pages.node_exporter)
            Query("node", "ib_rx_errors", self.agg(
                "sum", self.sel("node_infiniband_port_errors_received_total"), ib)),
            Query("node", "ib_recoveries", self.agg(
                "sum", self.sel("node_infiniband_link_error_recovery_total"), ib)),
            Query("node", "ib_integrity", self.agg(
                "sum", self.sel("node_infiniband_local_link_integrity_errors_total"), ib)),
            Query("node", "ib_phys", self.agg("max", self.sel("node_infiniband_physical_state_id"), ib)),
            Query("node", "eth_rx_errors", self.agg("sum", self.sel(
                "node_network_receive_errs_total", real), eth)),
            Query("node", "eth_tx_errors", self.agg("sum", self.sel(
                "node_network_transmit_errs_total", real), eth)),
            Query("node", "eth_rx_drops", self.agg("sum", self.sel(
                "node_network_receive_drop_total", real), eth)),
            Query("node", "eth_tx_drops", self.agg("sum", self.sel(
                "node_network_transmit_drop_total", real), eth)),
            Query("node", "mem_total", self.agg("max", self.sel("node_memory_MemTotal_bytes"))),
            Query("node", "mem_avail", self.agg("max", self.sel("node_memory_MemAvailable_bytes"))),
            Query("node", "load1", self.agg("max", self.sel("node_load1"))),
            Query("node", "timestamp", self.agg("max", self._alts(
                ("node_network_receive_bytes_total", "node_load1"), wrap="timestamp"))),
        ]

    def tier(self, name: str) -> list[Query]:
        return {"engine": self.engine, "gpu": self.gpu, "node": self.node}[name]()


def _regex_alts(values: Iterable[str]) -> str:
    """The values as one RE2 alternation, escaped for a PromQL string literal."""
    alts = "|".join(re.escape(v) for v in sorted(set(values)))
    return alts.replace("\\", "\\\\").replace('"', '\\"')


def recorded_for_nodes(query: Query, values: Iterable[str]) -> Query:
    """A recorded series' query narrowed to the nodes whose `infertop_node` is one of
    `values` (the prom source's detail for a few nodes, collectors/sources/prom_detail.py)."""
    return Query(query.tier, query.key, f'{query.promql}{{{NODE}=~"(?:{_regex_alts(values)})"}}')


def answer_for_nodes(query: Query, recorded_series: str, values: Iterable[str]) -> Query:
    """`query`'s answer narrowed to the nodes whose `infertop_node` is one of `values`, by
    a recorded series that carries it (one a node): the server computes the whole query,
    but only those nodes' series travel and are decoded. For a raw query no node-label
    matcher can narrow (several node labels)."""
    nodes = f'{recorded_series}{{{NODE}=~"(?:{_regex_alts(values)})"}}'
    return Query(query.tier, query.key, f"({query.promql}) and on ({NODE}) {nodes}")


def raw_for_nodes(builder: QueryBuilder, tier: str, values: Iterable[str]) -> dict[str, Query] | None:
    """The tier's raw queries (key → query) narrowed on the node label itself to the nodes
    whose label value (the port after it, as `strip_port` strips it) is one of `values`;
    None where the layout names several node labels (the first present wins per series,
    which one matcher cannot say): the caller then reads every node."""
    if len(builder.node_labels) != 1:
        return None
    port = "(?::[0-9]+)?" if builder.strip_port else ""
    matcher = f'{builder.node_labels[0]}=~"(?:{_regex_alts(values)}){port}"'
    selector = f"{builder.selector}, {matcher}" if builder.selector else matcher
    return {q.key: q for q in dataclasses.replace(builder, selector=selector).tier(tier)}


# ---------------------------------------------------------------------------- results


def number(text: Any) -> float | None:
    """A Prometheus sample value ("1.5", "NaN", "+Inf") → float; non-finite is unknown."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


# node label value → {key → {sub-key (gpu / device…) → value}}
Grouped = dict[str, dict[str, dict[tuple[str, ...], float | None]]]


def group_instant(key: str, result: Iterable[Mapping[str, Any]], by: Sequence[str], out: Grouped) -> None:
    """Fold one instant-query result into `out[node][key][(by-label values…)]`.

    Every series of a round passes here (~600k at 1,250 nodes): the answer's own types
    (dict, list, str) are tested by identity, not through the ABCs (`isinstance(x,
    Mapping)` was a third of this function's time), and the sub-key is built per arity."""
    labels_key = key.startswith(LABELS_KEY)
    arity = len(by)
    first = by[0] if arity else ""
    second = by[1] if arity > 1 else ""
    isfinite = math.isfinite
    per_key: dict[tuple[str, ...], float | None] | None = None
    per_key_node = None
    for series in result:
        if type(series) is not dict and not isinstance(series, Mapping):
            continue
        labels = series.get("metric") or {}
        node = labels.get(NODE)
        value = series.get("value")
        if type(node) is not str or not node:
            continue
        if (type(value) is not list and not isinstance(value, list | tuple)) or len(value) != 2:
            continue
        sub: tuple[str, ...]
        if labels_key:
            sub = tuple(sorted(f"{k}={v}" for k, v in labels.items() if k not in (NODE, "__name__")))
        elif arity == 1:
            sub = (str(labels.get(first, "")),)
        elif arity == 2:
            sub = (str(labels.get(first, "")), str(labels.get(second, "")))
        elif arity:
            sub = tuple([str(labels.get(b, "")) for b in by])
        else:
            sub = ()
        if node != per_key_node or per_key is None:
            # a node's series come together in an answer: look its dict up once per run
            per_node = out.get(node)
            if per_node is None:
                per_node = out[node] = {}
            per_key = per_node.get(key)
            if per_key is None:
                per_key = per_node[key] = {}
            per_key_node = node
        if labels_key and len(per_key) >= _MAX_INFO_SERIES and sub not in per_key:
            continue
        try:
            number_value = float(value[1])
        except (TypeError, ValueError):
            per_key[sub] = None
            continue
        per_key[sub] = number_value if isfinite(number_value) else None  # NaN, ±Inf: unknown


def group_range(
    key: str, result: Iterable[Mapping[str, Any]], by: Sequence[str]
) -> dict[str, dict[tuple[str, ...], dict[float, float | None]]]:
    """A range-query result → node → sub-key → {eval time → value}."""
    out: dict[str, dict[tuple[str, ...], dict[float, float | None]]] = {}
    for series in result:
        labels = series.get("metric") or {}
        node = labels.get(NODE)
        if not isinstance(node, str) or not node:
            continue
        sub = tuple(str(labels.get(b, "")) for b in by)
        points = out.setdefault(node, {}).setdefault(sub, {})
        for pair in series.get("values") or ():
            if isinstance(pair, list | tuple) and len(pair) == 2:
                t = number(pair[0])
                if t is not None:
                    points[t] = number(pair[1])
    return out


SUBKEYS: dict[str, tuple[str, ...]] = {
    _ENGINE_STEPS_BY_ENGINE: ENGINE_LABELS,
    "util_pct": ("gpu", "modelName"),
    "eth_rx": ("device",), "eth_tx": ("device",), "eth_up": ("device",), "eth_speed": ("device",),
    "eth_carrier": ("device",),
    "ib_rx": ("device", "port"), "ib_tx": ("device", "port"), "ib_state": ("device", "port"),
    "ib_rate": ("device", "port"), "ib_wait": ("device", "port"),
    **{k: ("device", "port") for k in ("ib_rx_errors", "ib_recoveries", "ib_integrity", "ib_phys")},
    **{k: ("device",) for k in ("eth_rx_errors", "eth_tx_errors", "eth_rx_drops", "eth_tx_drops")},
}
_GPU_KEYS = ("mem_used_mib", "mem_free_mib", "mem_reserved_mib", "mem_total_mib", *ACTIVITY_METRICS,
             "power_w", "temp_c", "sm_clock_mhz", "xid_last",
             "energy_mj_total", "nvlink_total", "clock_event_reasons", "ecc_dbe")


def subkeys(tier: str, key: str) -> tuple[str, ...]:
    if tier == "gpu" and key in _GPU_KEYS:
        return ("gpu",)
    if tier == "engine" and key.startswith(LATENCY_KEY):
        return ("le",)
    if tier == "engine" and key.removeprefix(RANK_KEY) == POSITIONS_KEY:
        return (*ENGINE_LABELS, POSITION_LABEL) if key.startswith(RANK_KEY) else (POSITION_LABEL,)
    if tier == "engine" and (per_rank := rank_subkeys(key, LATENCY_KEY)) is not None:
        return per_rank
    return SUBKEYS.get(key, ())


def single(fig: Mapping[str, Mapping[tuple[str, ...], float | None]], key: str) -> float | None:
    values = fig.get(key)
    if not values:
        return None
    return next(iter(values.values()))


# a builder's `extra`: more NodeSample fields (notes, backend_behind_s), set as it is
# built rather than copied in after (a copy of every sample cost a round ~0.1 s at 1,024 nodes)
_NONE: Mapping[str, Any] = {}


def engine_sample(node: str, taken_at: float, fig: Mapping[str, Mapping[tuple[str, ...], float | None]],
                  source: str, extra: Mapping[str, Any] = _NONE) -> NodeSample | None:
    values = {k: single(fig, k) for k in (*ENGINE_COUNTER_FIELDS, *ENGINE_GAUGE_FIELDS)}
    if all(v is None for v in values.values()):
        return None
    # named as collectors/pages/profiles.py names them ("engine=3", "dp_rank=1", "-")
    per_engine = {
        ",".join(f"{label}={v}" for label, v in zip(ENGINE_LABELS, sub, strict=False) if v) or "-": value
        for sub, value in (fig.get(_ENGINE_STEPS_BY_ENGINE) or {}).items()
        if value is not None
    }
    extras: dict[str, Any] = {k: single(fig, k) for k in SCOREBOARD_SCALARS}
    extras.update(_info_fields(fig))
    latency = {
        key.removeprefix(LATENCY_KEY): buckets
        for key, by_le in fig.items()
        if key.startswith(LATENCY_KEY) and (buckets := _buckets(by_le)) is not None
    }
    extras[POSITIONS_KEY] = by_position(fig.get(POSITIONS_KEY))
    ranks = rank_samples(fig, _ENGINE_STEPS_BY_ENGINE, LATENCY_KEY, _buckets, SCOREBOARD_SCALARS)
    return NodeSample(node=node, source=source, taken_at=taken_at, **extra,
                      engine=EngineSample(source="endpoint", profile="prom",
                                          steps_by_engine_total=per_engine or None, **values, **extras,
                                          latency_buckets=latency or None, ranks=ranks))


def by_position(by_sub: Mapping[tuple[str, ...], float | None] | None) -> tuple[float, ...] | None:
    """`{(…, position): count}` → the counters of positions 0..k-1 (None unless whole)."""
    if not by_sub:
        return None
    if any(v is None for v in by_sub.values()):
        return None
    return accepted_by_position(({POSITION_LABEL: sub[-1]}, v) for sub, v in by_sub.items() if v is not None)


# a node's settings from its info gauges' labels, kept by those labels: they change when an
# engine restarts with other settings, not from tick to tick (issue 48: every node, every
# tick, ~5 % of a 1,250-node tick). Room for the largest fleet measured, several times over.
SETTINGS_CACHE_NODES = 16_384
_INFO_KEYS = tuple(f"{LABELS_KEY}{gauge}" for gauge in INFO_GAUGES)

LabelSets = tuple[tuple[str, ...], ...]  # a query's series for one node: each a sub-key of "label=value"


def _label_dicts(subs: Iterable[tuple[str, ...]]) -> list[dict[str, str]]:
    return [dict(pair.partition("=")[::2] for pair in sub) for sub in subs]


@lru_cache(maxsize=SETTINGS_CACHE_NODES)
def _label_settings(base: LabelSets, info: tuple[LabelSets, ...]) -> tuple[tuple[str, str], ...] | None:
    """`settings_from_labels` over one node's info series (`info`: each of INFO_GAUGES's),
    the labels of its engines' own series (`base`) left out as Prometheus's."""
    target_labels = {label for labels in _label_dicts(base) for label in labels}
    settings = settings_from_labels(
        ((prefix, labels) for prefix, subs in zip(INFO_GAUGES.values(), info, strict=True)
         for labels in _label_dicts(subs)),
        target_labels,
    )
    return None if settings is None else tuple(settings.items())


def _info_fields(fig: Mapping[str, Mapping[tuple[str, ...], float | None]]) -> dict[str, Any]:
    """EngineSample settings and health from the info and health gauges' queries; the
    settings only where the engine's own series show which labels are Prometheus's."""
    out: dict[str, Any] = {}
    base = tuple(fig.get(LABELS_BASE) or ())
    if base:
        settings = _label_settings(base, tuple(tuple(fig.get(key) or ()) for key in _INFO_KEYS))
        if settings is not None:
            out["settings"] = dict(settings)
    from_values = settings_from_values(
        (setting, value) for gauge, setting in VALUE_SETTINGS.items()
        for value in (fig.get(f"{LABELS_KEY}{gauge}") or {}).values() if value is not None
    )
    if from_values is not None:
        out["settings"] = dict(sorted({**from_values, **out.get("settings", {})}.items()))
    health = single(fig, _HEALTH_KEY)
    if health is not None:
        out["healthy"] = health >= 1
    return out


def _buckets(by_le: Mapping[tuple[str, ...], float | None]) -> tuple[tuple[float, float], ...] | None:
    """`{(le,): count}` → cumulative buckets sorted by bound, +Inf last; None unless every
    count is known, a +Inf bucket is there and counts never fall as the bound rises."""
    rows = []
    for (le_text, *_), count in by_le.items():
        le = bucket_bound(le_text)  # cached: the same few texts on every node and round
        if count is None or le is None:
            return None
        rows.append((le, count))
    rows.sort()
    if not rows or not math.isinf(rows[-1][0]):
        return None
    if any(b[1] < a[1] for a, b in itertools.pairwise(rows)):
        return None
    return tuple(rows)


def _int(value: float | None) -> int | None:
    return whole(value)


def gpu_sample(node: str, taken_at: float, fig: Mapping[str, Mapping[tuple[str, ...], float | None]],
               source: str, extra: Mapping[str, Any] = _NONE) -> NodeSample | None:
    by_gpu: dict[str, dict[str, float | None]] = {}
    names: dict[str, str | None] = {}
    for (gpu, model), value in (fig.get("util_pct") or {}).items():
        by_gpu.setdefault(gpu, {})["util_pct"] = value
        names[gpu] = model or None
    for key in _GPU_KEYS:
        for (gpu,), value in (fig.get(key) or {}).items():
            by_gpu.setdefault(gpu, {})[key] = value
    gpus = []
    for gpu, f in by_gpu.items():
        try:
            index = int(gpu)
        except ValueError:
            continue
        used, free = f.get("mem_used_mib"), f.get("mem_free_mib")
        total = f.get("mem_total_mib")
        if total is None and used is not None and free is not None:
            total = used + free + (f.get("mem_reserved_mib") or 0.0)
        activity = {key: None if (v := f.get(key)) is None else v * ACTIVITY_FACTOR
                    for key in ACTIVITY_METRICS}
        energy = f.get("energy_mj_total")
        gpus.append(GpuSample(
            index=index, name=names.get(gpu), util_pct=f.get("util_pct"),
            mem_used_bytes=None if used is None else whole(used * _MIB),
            mem_total_bytes=None if total is None else whole(total * _MIB),
            power_w=f.get("power_w"), temp_c=f.get("temp_c"), sm_clock_mhz=f.get("sm_clock_mhz"),
            xid_last=_int(f.get("xid_last")),
            energy_j_total=None if energy is None else energy / 1000.0,
            nvlink_bytes_per_s=None if f.get("nvlink_total") is None
            else f["nvlink_total"] * NVLINK_TOTAL_BYTES_PER_UNIT,  # type: ignore[operator]
            clock_event_reasons=_int(f.get("clock_event_reasons")),
            ecc_uncorrected_total=_int(f.get("ecc_dbe")),
            activity_source="dcgm" if any(v is not None for v in activity.values()) else None,
            **activity,
        ))
    if not gpus:
        return None
    gpus.sort(key=lambda g: g.index)
    unseen = {}
    if all(g.clock_event_reasons is None for g in gpus):
        unseen["clock_events"] = CLOCK_REASONS_UNSEEN
    return NodeSample(node=node, source=source, taken_at=taken_at, gpus=gpus, unseen=unseen, **extra)


def _eth_state(up: float | None, carrier: float | None) -> str | None:
    """node_network_up is operstate == "up"; 0 with a carrier is a port whose driver
    reports no operstate (loopback, tun: `unknown`), not a down one (probe.host.port_state)."""
    if up is None:
        return None
    if up >= 1:
        return "up"
    return port_state("unknown", int(carrier)) if carrier is not None and carrier >= 1 else "down"


def node_sample(node: str, taken_at: float, fig: Mapping[str, Mapping[tuple[str, ...], float | None]],
                source: str, extra: Mapping[str, Any] = _NONE) -> NodeSample | None:
    nics: list[NicSample] = []
    eth = fig.get("eth_rx") or {}
    for sub in sorted(set(eth) | set(fig.get("eth_up") or {})):
        up = (fig.get("eth_up") or {}).get(sub)
        speed = (fig.get("eth_speed") or {}).get(sub)
        nics.append(NicSample(
            name=sub[0], kind="ethernet",
            state=_eth_state(up, (fig.get("eth_carrier") or {}).get(sub)),
            speed_gbps=speed * 8 / 1e9 if speed else None,
            rx_bytes_total=eth.get(sub), tx_bytes_total=(fig.get("eth_tx") or {}).get(sub),
            rx_errors_total=(fig.get("eth_rx_errors") or {}).get(sub),
            tx_errors_total=(fig.get("eth_tx_errors") or {}).get(sub),
            rx_drops_total=(fig.get("eth_rx_drops") or {}).get(sub),
            tx_drops_total=(fig.get("eth_tx_drops") or {}).get(sub),
        ))
    ib = fig.get("ib_rx") or {}
    ports = sorted(set(ib) | set(fig.get("ib_state") or {}))
    per_device: dict[str, int] = {}
    for device, _port in ports:
        per_device[device] = per_device.get(device, 0) + 1
    for sub in ports:
        device, port = sub
        state = (fig.get("ib_state") or {}).get(sub)
        rate = (fig.get("ib_rate") or {}).get(sub)
        nics.append(NicSample(
            # the probe's naming: the device alone when it has one port
            name=device if per_device[device] == 1 else f"{device}/{port}", kind="infiniband",
            state=None if state is None else ("active" if state == 4 else "down"),
            speed_gbps=rate * 8 / 1e9 if rate else None,
            rx_bytes_total=ib.get(sub), tx_bytes_total=(fig.get("ib_tx") or {}).get(sub),
            xmit_wait_total=(fig.get("ib_wait") or {}).get(sub),
            rx_errors_total=(fig.get("ib_rx_errors") or {}).get(sub),
            link_recoveries_total=(fig.get("ib_recoveries") or {}).get(sub),
            link_integrity_errors_total=(fig.get("ib_integrity") or {}).get(sub),
            physical_state=ib_physical_state((fig.get("ib_phys") or {}).get(sub)),
        ))
    total, avail = single(fig, "mem_total"), single(fig, "mem_avail")
    load1 = single(fig, "load1")
    host = None
    if total is not None or load1 is not None:
        host = HostSample(
            mem_total_bytes=_int(total),
            mem_used_bytes=None if total is None or avail is None else whole(total - avail),
            load1=load1,
        )
    if not nics and host is None:
        return None
    return NodeSample(node=node, source=source, taken_at=taken_at, nics=nics, host=host, **extra)


BUILDERS = {"engine": engine_sample, "gpu": gpu_sample, "node": node_sample}
