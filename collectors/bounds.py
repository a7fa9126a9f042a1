"""What a node can physically report: the one place where absurd values become unknown.

A node, an exporter or an engine page may send anything: NaN, infinities, 1e308, a GPU
drawing a megawatt, minus five waiting requests. Two checks, each in one place:

- **values** (`within_bounds`): every sample enters the monitor through `Fleet._emit`,
  which passes it through `within_bounds` first. A gauge beyond what hardware can do, a
  negative count, a non-finite number or a counter beyond 2**64 (no kernel or engine
  counter holds more) becomes `None`, and the sample gets a note naming the field and the
  value. Nothing later (sums over GPUs or nodes, the money ledger, sparklines) ever sees
  such a value, so no later sum can overflow to infinity.
- **rises** (`counter_trust`, used by `collectors.rates`): a counter's value may be
  plausible while its rise is not (100 → 1e18 in a second). `COUNTER_MAX_PER_S` says how
  fast each counter can rise on one node; a step faster than that, or a counter that goes
  down twice within `RESET_REPEAT_S`, is not trusted: its rate is unknown with a note and
  the ledger does not count it (see `collectors.rates.step_doubt`).

The limits are generous on purpose (several times beyond today's hardware): they catch
garbage and hostile input, never a fast cluster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from infertop.collectors.pages.exposition import clean_label
from infertop.collectors.rates import CounterTrust
from infertop.collectors.sample import EngineSample, HostSample, NodeSample

TIB = 1024**4
COUNTER_MAX = float(2**64)  # no u64 counter (kernel, NVML, engine) holds more
# (low, high), both inclusive; None and values within pass, anything else is unknown
Bounds = Mapping[str, tuple[float, float]]
_COUNTER = (0.0, COUNTER_MAX)

GPU_BOUNDS: Bounds = {
    "util_pct": (0.0, 100.0),
    "mem_used_bytes": (0.0, 16 * TIB),
    "mem_total_bytes": (0.0, 16 * TIB),
    "mem_info_version": (1.0, 2.0),
    "power_w": (0.0, 5000.0),  # a whole GB300 superchip draws well under 2 kW
    "temp_c": (-50.0, 200.0),
    "sm_clock_mhz": (0.0, 10_000.0),
    "clock_event_reasons": (0.0, COUNTER_MAX),  # a bitmask
    "xid_last": (0.0, 2.0**31),
    "ecc_uncorrected_total": _COUNTER,
    "energy_j_total": _COUNTER,
    "nvlink_links_total": (0.0, 1024.0),
    "nvlink_links_up": (0.0, 1024.0),
    "nvlink_tx_bytes_total": _COUNTER,
    "nvlink_rx_bytes_total": _COUNTER,
    "nvlink_errors_total": _COUNTER,
    "nvlink_tx_bytes_per_s": (0.0, 4e12),  # NVLink 5 carries 0.9 TB/s each way
    "nvlink_rx_bytes_per_s": (0.0, 4e12),
    "nvlink_bytes_per_s": (0.0, 8e12),
    # real activity (GPM / DCGM profiling), percent
    "sm_active_pct": (0.0, 100.0),
    "sm_occupancy_pct": (0.0, 100.0),
    "tensor_active_pct": (0.0, 100.0),
    "dram_active_pct": (0.0, 100.0),
}
NIC_BOUNDS: Bounds = {
    "speed_gbps": (0.0, 3200.0),  # 3.2 Tb/s: four times today's fastest port
    "rx_bytes_total": _COUNTER,
    "tx_bytes_total": _COUNTER,
    "xmit_wait_total": _COUNTER,
    "link_downed_total": _COUNTER,
    "errors_total": _COUNTER,
    "rx_bytes_per_s": (0.0, 4e11),  # 3.2 Tb/s in bytes
    "tx_bytes_per_s": (0.0, 4e11),
    "rx_errors_total": _COUNTER,
    "tx_errors_total": _COUNTER,
    "rx_drops_total": _COUNTER,
    "tx_drops_total": _COUNTER,
    "link_recoveries_total": _COUNTER,
    "link_integrity_errors_total": _COUNTER,
    "rx_pause_total": _COUNTER,
    "tx_pause_total": _COUNTER,
    "cnp_sent_total": _COUNTER,
    "cnp_handled_total": _COUNTER,
    "ecn_marked_total": _COUNTER,
    "members_up": (0.0, 1024.0),
    "accelerator_index": (0.0, 1024.0),
}
HOST_BOUNDS: Bounds = {
    "cpu_pct": (0.0, 100.0),
    "mem_used_bytes": (0.0, 64 * TIB),
    "mem_total_bytes": (0.0, 64 * TIB),
    "load1": (0.0, 1e6),
}
ENGINE_BOUNDS: Bounds = {
    **{f: _COUNTER for f in (
        "steps_total", "drafts_total", "draft_tokens_total", "accepted_tokens_total",
        "generation_tokens_total", "prompt_tokens_total", "prompt_cached_tokens_total",
        "requests_finished_total", "requests_aborted_total", "ttft_seconds_sum", "ttft_seconds_count",
        "itl_seconds_sum", "itl_seconds_count", "log_lines_skipped_total",
        "preemptions_total", "prefix_cache_queries_total", "prefix_cache_hits_total",
        "external_prefix_cache_queries_total", "external_prefix_cache_hits_total",
        "kv_transfer_bytes_total", "kv_transfer_failures_total", "kv_transfer_seconds_sum",
        "kv_transfer_seconds_count", "expert_balancedness_sum", "expert_balancedness_count",
        "kv_transfer_expired_total", "log_stats_seconds_total",
    )},
    "kv_transfer_speed_bytes_per_s": (0.0, 1e13),  # 10 TB/s: beyond any node's fabric
    "kv_transfer_latency_s": (0.0, 1e5),
    "requests_running": (0.0, 1e7),
    "requests_waiting": (0.0, 1e7),
    "kv_cache_usage": (0.0, 1.0),  # a share of the KV pool
    "spec_accept_rate": (0.0, 1.0),
    "spec_accept_length": (1.0, 1024.0),  # tokens per verify, bonus included
    "log_last_line_at": (0.0, 2.0**32),  # unix seconds (until 2106)
    "log_stats_line_at": (0.0, 2.0**32),
    "counters_started_at": (0.0, 2.0**32),
}

# The fastest a counter can rise on one node, per second. Tokens: a node of 8 GPUs
# prefills ~1e6 tokens/s at most today; a port carries 3.2 Tb/s at most (see NIC_BOUNDS).
_TOKENS_PER_S = 1e8
COUNTER_MAX_PER_S: Mapping[str, float] = {
    "steps_total": 1e6,
    "drafts_total": _TOKENS_PER_S,
    "draft_tokens_total": _TOKENS_PER_S,
    "accepted_tokens_total": _TOKENS_PER_S,
    "accepted_tokens_by_position_total": _TOKENS_PER_S,  # one position's (draft_positions.py)
    "generation_tokens_total": _TOKENS_PER_S,
    "prompt_tokens_total": _TOKENS_PER_S,
    "prompt_cached_tokens_total": _TOKENS_PER_S,
    "requests_finished_total": 1e7,
    "requests_aborted_total": 1e7,
    "preemptions_total": 1e7,
    "prefix_cache_queries_total": _TOKENS_PER_S,
    "prefix_cache_hits_total": _TOKENS_PER_S,
    "external_prefix_cache_queries_total": _TOKENS_PER_S,
    "external_prefix_cache_hits_total": _TOKENS_PER_S,
    "kv_transfer_bytes_total": 4e12,  # more than a node's NICs and NVLink together
    "kv_transfer_failures_total": 1e7,
    "kv_transfer_expired_total": 1e7,
    "rx_bytes_total": 4e11,  # 3.2 Tb/s in bytes
    "tx_bytes_total": 4e11,
    "xmit_wait_total": 1e10,  # IB ticks waited: bounded by the port's clock
    "errors_total": 1e10,  # bounded by the packet rate
    "rx_errors_total": 1e10,
    "tx_errors_total": 1e10,
    "rx_drops_total": 1e10,
    "tx_drops_total": 1e10,
    "link_recoveries_total": 1e6,  # each takes link retraining: far fewer than packets
    "link_integrity_errors_total": 1e6,
    "rx_pause_total": 1e9,  # a pause quantum is 512 bit times: ~1.5e9/s at 800 Gb/s, far more than sent
    "tx_pause_total": 1e9,
    "pause_by_priority_total": 1e9,  # one priority's: as the sum's
    "cnp_sent_total": 1e9,  # at most one per packet
    "cnp_handled_total": 1e9,
    "ecn_marked_total": 1e9,  # at most one per packet
    "nvlink_tx_bytes_total": 4e12,
    "nvlink_rx_bytes_total": 4e12,
}
_TRUST = {name: CounterTrust(max_per_s=rate) for name, rate in COUNTER_MAX_PER_S.items()}


def counter_trust(key: Hashable) -> CounterTrust | None:
    """How far to trust the counter a rate key names: the key is the sample's field name,
    or a tuple ending with it ((GPU index, field), (port name, field))."""
    field = key[-1] if isinstance(key, tuple) and key else key
    return _TRUST.get(field) if isinstance(field, str) else None


def _show(value: Any) -> str:
    """A number for a note, whatever it is (an int of 400 digits does not fit a float)."""
    try:
        return f"{float(value):.3g}"
    except OverflowError:
        return "beyond 1e308"


class _Findings:
    """Out-of-bounds values found in one sample, one note per (part, field)."""

    def __init__(self) -> None:
        self.by_field: dict[tuple[str, str], list[tuple[str, Any]]] = {}

    def add(self, part: str, field: str, where: str, value: Any) -> None:
        self.by_field.setdefault((part, field), []).append((where, value))

    def notes(self, bounds_of: Mapping[str, Bounds]) -> list[str]:
        out = []
        for (part, field), found in self.by_field.items():
            where, value = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            lo, hi = bounds_of[part][field]
            out.append(
                f"{where} {field} = {_show(value)}{more} is beyond {_show(lo)}–{_show(hi)}: "
                "shown as unknown"
            )
        return out


def _bounded(
    part: BaseModel, bounds: Bounds, kind: str, where: Callable[[BaseModel], str], found: _Findings
) -> BaseModel:
    """`part` with every value outside `bounds` set to None (the same object if none is).
    `where` names the part for a note, only when one is needed (this runs on every GPU and
    port of every sample)."""
    bad: dict[str, None] = {}
    for field, (lo, hi) in bounds.items():
        value = getattr(part, field)
        # one comparison rejects NaN, ±inf and ints too large for a float alike
        if value is not None and not lo <= value <= hi:
            found.add(kind, field, where(part), value)
            bad[field] = None
    return part.model_copy(update=bad) if bad else part


def _bounded_list(
    parts: Sequence[BaseModel] | None, bounds: Bounds, kind: str,
    where: Callable[[Any], str], found: _Findings,
) -> list[Any] | None:
    if parts is None:
        return None
    return [_bounded(p, bounds, kind, where, found) for p in parts]


_BOUNDS_OF: dict[str, Bounds] = {
    "gpu": GPU_BOUNDS, "nic": NIC_BOUNDS, "host": HOST_BOUNDS, "engine": ENGINE_BOUNDS,
}


def within_bounds(sample: NodeSample) -> NodeSample:
    """The sample with physically impossible values made unknown, and a note for each
    field; the very same object when every value is within bounds (the usual case)."""
    if sample.error is not None:
        return sample
    found = _Findings()
    gpus = _bounded_list(
        sample.gpus, GPU_BOUNDS, "gpu", lambda g: f"{g.kind.upper()} {g.index}", found
    )
    nics = _bounded_list(
        sample.nics, NIC_BOUNDS, "nic", lambda n: f"port {clean_label(n.name[:40])}", found
    )
    host = (
        None if sample.host is None
        else _bounded(sample.host, HOST_BOUNDS, "host", lambda _: "host", found)
    )
    engine = (
        None if sample.engine is None
        else _bounded(sample.engine, ENGINE_BOUNDS, "engine", lambda _: "engine", found)
    )
    if not found.by_field:
        return sample
    assert host is None or isinstance(host, HostSample)
    assert engine is None or isinstance(engine, EngineSample)
    return sample.model_copy(update={
        "gpus": gpus, "nics": nics, "host": host, "engine": engine,
        "notes": [*sample.notes, *found.notes(_BOUNDS_OF)],
    })


def whole(value: float | None) -> int | None:
    """`int(value)` for a figure converted to a count (MiB → bytes), or None where there is
    none: a finite float times a factor can overflow to infinity, and `int(inf)` raises."""
    return int(value) if value is not None and math.isfinite(value) else None

