"""The scoreboard's series on a demo engine page: end-to-end and queue-time histograms,
and on the decode pool the NIXL KV-transfer series of a disaggregated vLLM deployment.

Driven by the node's own cumulative counters (requests finished), so the rates follow
the simulated load and restart with the engine; the distributions are log-normal around
a per-node mean (a straggler's requests take longer), spread over vLLM's own bucket sets
(`vllm/v1/metrics/loggers.py`, NIXL `vllm:nixl_*` from its KV connector stats).
Kept out of `render.py` so that the engine page's main shape can change independently.
"""

from __future__ import annotations

import math

from infertop.demo.pd_trouble import kv_slowdown
from infertop.demo.scenario import NUM_SPEC_TOKENS, STRAGGLER_RATIO, SimNode

REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
NIXL_TIME_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
NIXL_BYTES_BUCKETS = tuple(float(2**k) for k in range(11, 35, 2))  # 2 KiB … 16 GiB
PROMPT_TOKENS = 3000.0  # per request (as in the scenario's prefill pool)
OUTPUT_TOKENS = 900.0  # per request (as in the scenario's decode pool)
KV_BYTES_PER_TOKEN = 70_272.0  # DeepSeek-V3 MLA: 61 layers × 576 values × 2 bytes
KV_LINK_BYTES_PER_S = 20e9  # what one transfer gets of the node's 4 × 400 Gb/s IB
SPREAD = 0.45  # log-normal sigma: p99 ≈ 2.8 × the median


def _share_within(le: float, median: float) -> float:
    """Log-normal CDF at `le`."""
    return 0.5 * (1 + math.erf((math.log(le) - math.log(median)) / (SPREAD * math.sqrt(2))))


def _histogram(out: list[str], name: str, help_: str, labels: str, buckets: tuple[float, ...],
               count: float, median: float, created: float) -> None:
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} histogram")
    for le in buckets:
        out.append(f'{name}_bucket{{{labels},le="{le}"}} {count * _share_within(le, median):.1f}')
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} {count:.1f}')
    out.append(f"{name}_count{{{labels}}} {count:.1f}")
    # the sum of a log-normal: count × mean
    out.append(f"{name}_sum{{{labels}}} {count * median * math.exp(SPREAD**2 / 2):.6f}")
    out.append(f"# HELP {name}_created {help_}")
    out.append(f"# TYPE {name}_created gauge")
    out.append(f"{name}_created{{{labels}}} {created:.6e}")


def _counter(out: list[str], name: str, help_: str, labels: str, value: float, created: float) -> None:
    out.append(f"# HELP {name}_total {help_}")
    out.append(f"# TYPE {name}_total counter")
    out.append(f"{name}_total{{{labels}}} {value:.1f}")
    out.append(f"# HELP {name}_created {help_}")
    out.append(f"# TYPE {name}_created gauge")
    out.append(f"{name}_created{{{labels}}} {created:.6e}")


def request_latencies_s(node: SimNode) -> tuple[float, float]:
    """(e2e, queue) median seconds of the node's requests, from the scenario's rates."""
    if node.plan.role == "decode":
        steps = node.base_steps * (STRAGGLER_RATIO if node.plan.trouble == "straggler" else 1.0)
        per_user = steps * (1 + NUM_SPEC_TOKENS * node.base_acceptance)  # tokens/s a request gets
        return OUTPUT_TOKENS / per_user, 0.05
    return 0.6, 0.3  # prefill finishes at the first token; arrivals come in waves


def engine_extra_lines(node: SimNode, labels: str, created: float, latencies: bool = True) -> list[str]:
    """The extra series of one engine page (after `node.advance(now)`); without
    `latencies`, the NIXL series only (the realistic page has its own request histograms)."""
    e = node.engine
    finished = e.finished_stop + e.finished_length
    out: list[str] = []
    e2e, queue = request_latencies_s(node)
    if latencies:
        _histogram(out, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                   labels, REQUEST_BUCKETS, finished, e2e, created)
        _histogram(out, "vllm:request_queue_time_seconds",
                   "Histogram of time spent in WAITING phase for request.",
                   labels, REQUEST_BUCKETS, finished, queue, created)
    if node.plan.role == "decode" and node.plan.trouble != "idle":
        # each request's KV cache is pulled from a prefill node before it decodes
        kv_bytes = PROMPT_TOKENS * KV_BYTES_PER_TOKEN
        _histogram(out, "vllm:nixl_bytes_transferred", "Bytes transferred per NIXL KV Cache transfer.",
                   labels, NIXL_BYTES_BUCKETS, finished, kv_bytes / math.exp(SPREAD**2 / 2), created)
        _histogram(out, "vllm:nixl_xfer_time_seconds", "Transfer duration for NIXL KV Cache transfers.",
                   labels, NIXL_TIME_BUCKETS, finished, kv_bytes / KV_LINK_BYTES_PER_S * kv_slowdown(node),
                   created)
        _counter(out, "vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.",
                 labels, 0.0, created)
    return out
