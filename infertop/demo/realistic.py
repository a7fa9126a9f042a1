"""Real-size pages for the demo: what a DeepInfer node's exporters really serve.

`render.py` writes ~100-line pages with just the families infertop reads. A real node
serves far more, and the monitor's cost is set by what it must wade through. This module
writes the engine page: one vLLM API server fronting 8 data-parallel engines (DP
attention on 8 GPUs), every stock vLLM family once per engine (`engine` label),
histograms with vLLM's own bucket bounds (the definitions `tests/fixtures/vllm_dp_page.py`
feeds to `prometheus_client`; a test checks both pages have the same families and
buckets): ~2,900 lines, ~300 KB. `realistic_hosts.py` writes dcgm-exporter's and
node_exporter's pages.

The demo's truth is unchanged: the figures the scenario drives come out of these pages
exactly as out of the small ones. Counters are split over the 8 engines in whole units
of their last printed digit (engine i gets floor((q + i) / 8) of q units), so every
engine's counter only ever rises and the engines sum to the scenario's figure; the step
count is the same on every engine (they step in lockstep); KV-cache use is the same on
every engine (the profile averages it). No renderer here draws from the node's random
stream, so the scenario's noise is what it was.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any
from weakref import WeakKeyDictionary

from prometheus_client.utils import floatToGoString

from infertop.demo.engine_extras import engine_extra_lines, request_latencies_s
from infertop.demo.pd_trouble import engine_info_lines
from infertop.demo.scenario import (
    MODEL_NAME,
    NUM_SPEC_TOKENS,
    SimNode,
)

ENGINES = 8  # data-parallel engines behind one API server (DP attention on 8 GPUs)
MAX_MODEL_LEN = 163840  # DeepSeek-V3 context
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
TPOT_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
PREFILL_TOKEN_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, … up to max_value."""
    out: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(value)
        exponent += 1


LEN_BUCKETS = build_1_2_5_buckets(MAX_MODEL_LEN)

# vLLM's histogram families (vllm/v1/metrics/loggers.py), in registration order
VLLM_HISTOGRAMS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", LEN_BUCKETS),
    ("vllm:request_generation_tokens", "Number of generation tokens processed.", LEN_BUCKETS),
    (
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        ITERATION_TOKENS_BUCKETS,
    ),
    (
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        LEN_BUCKETS,
    ),
    ("vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20)),
    ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", LEN_BUCKETS),
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS),
    ("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", TPOT_BUCKETS),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", TPOT_BUCKETS),
    (
        "vllm:time_per_prefill_token_request_seconds",
        "Time spent per token during prefill  phase in seconds",
        PREFILL_TOKEN_BUCKETS,
    ),
    (
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    (
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
)
_HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:gpu_cache_usage_perc": "GPU KV-cache usage. 1 means 100 percent usage."
    "DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:gpu_prefix_cache_queries": "GPU prefix cache queries, in terms of number of queried"
    "tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
    "vllm:gpu_prefix_cache_hits": "GPU prefix cache hits, in terms of number of cached "
    "tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.",
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
    "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
    "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
    "vllm:request_success": "Count of successfully processed requests.",
}


def _tenths(units: int) -> str:
    return f"{units // 10}.{units % 10}"


def _micros(units: int) -> str:
    return f"{units // 1_000_000}.{units % 1_000_000:06d}"


def split(total: float, scale: int = 10, engines: int = ENGINES) -> list[int]:
    """`total` in whole 1/scale units, over the engines: engine i gets floor((q + i) / n).
    Each share only rises when the total does, and the shares sum to q exactly."""
    q = max(0, round(total * scale))
    return [(q + i) // engines for i in range(engines)]


# Series no profile reads are redrawn every REFRESH_S rather than on every request, so
# the demo can serve 128 real-size nodes a second from one process on a small machine;
# their counters still only rise.
REFRESH_S = 10.0
_BLOCKS: WeakKeyDictionary[SimNode, dict[str, tuple[float, str]]] = WeakKeyDictionary()


def cached(node: SimNode, key: str, now: float, make: Callable[[], str]) -> str:
    blocks = _BLOCKS.setdefault(node, {})
    hit = blocks.get(key)
    if hit is None or not hit[0] - REFRESH_S <= now < hit[0]:
        # the first drawing lasts a share of REFRESH_S that depends on the node, so the
        # nodes redraw in different seconds, as independent hosts would (all at once, the
        # one process serving them was late by ~0.3 s every 10 s at 128 nodes)
        lasts = REFRESH_S * (1.0 + (node.plan.index % 10) / 10.0) if hit is None else REFRESH_S
        hit = (now + lasts, make())
        blocks[key] = hit
    return hit[1]


@lru_cache(maxsize=4096)
def _bucket_heads(name: str, head: str, model: str, buckets: tuple[float, ...]) -> tuple[str, ...]:
    """One engine's bucket lines up to their value (`name_bucket{…,le="…",…} `), the same
    every request: drawn once, so a request only picks each bucket's value."""
    return tuple(f'{name}_bucket{{{head},le="{float(le)}",{model}}} ' for le in buckets)


def _histogram(name: str, help_: str, buckets: tuple[float, ...], heads: list[str], model: str,
               counts: list[int], sums: list[int], created: str) -> list[str]:
    """One histogram family, 8 engines: counts in tenths, sums in micros; observations
    sit near their mean (enough for a monitor): buckets below it hold none, those below
    twice it nine tenths, the rest all."""
    out = [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
    for head, count, total in zip(heads, counts, sums, strict=True):
        mean = total / 1_000_000 / (count / 10) if count else 0.0
        all_in, most_in = _tenths(count), _tenths(count * 9 // 10)
        # the bounds ascend: the first bound ≥ the mean, and the first ≥ twice it
        empty, most = bisect_left(buckets, mean), bisect_left(buckets, 2 * mean)
        values = ["0.0"] * empty + [most_in] * (most - empty) + [all_in] * (len(buckets) - most)
        out.extend(map(str.__add__, _bucket_heads(name, head, model, buckets), values))
        out.append(f'{name}_bucket{{{head},le="+Inf",{model}}} {all_in}')
        out.append(f"{name}_count{{{head},{model}}} {all_in}")
        out.append(f"{name}_sum{{{head},{model}}} {_micros(total)}")
    out.append(f"# HELP {name}_created {help_}")
    out.append(f"# TYPE {name}_created gauge")
    out.extend(f"{name}_created{{{head},{model}}} {created}" for head in heads)
    return out


def _histogram_text(*args: Any) -> str:
    return "\n".join(_histogram(*args))


class Page:
    """Lines in exposition order, families as prometheus_client writes them."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def family(self, name: str, help_: str, kind: str) -> None:
        self.out.append(f"# HELP {name} {help_}")
        self.out.append(f"# TYPE {name} {kind}")

    def text(self) -> str:
        return "\n".join(self.out) + "\n"


def engine_page(node: SimNode, now: float) -> str:
    """The vLLM page of one node with 8 DP engines."""
    g = node.advance(now)
    e = node.engine
    # label names sorted, as prometheus_client writes them
    heads = [f'engine="{i}"' for i in range(ENGINES)]
    model = f'model_name="{MODEL_NAME}"'
    labels = [f"{head},{model}" for head in heads]
    created = floatToGoString(node.engine_started_at)
    page = Page()
    out = page.out

    def gauge(name: str, values: list[str]) -> None:
        page.family(name, _HELP[name], "gauge")
        out.extend(f"{name}{{{lab}}} {v}" for lab, v in zip(labels, values, strict=True))

    def counter(name: str, per_engine: list[list[tuple[str, str]]]) -> None:
        """per_engine[i]: (labels, value) of engine i's series."""
        page.family(f"{name}_total", _HELP[name], "counter")
        for series in per_engine:
            out.extend(f"{name}_total{{{lab}}} {v}" for lab, v in series)
        page.family(f"{name}_created", _HELP[name], "gauge")
        for series in per_engine:
            out.extend(f"{name}_created{{{lab}}} {created}" for lab, _ in series)

    def plain(name: str, total: float) -> None:
        counter(name, [[(lab, _tenths(q))] for lab, q in zip(labels, split(total), strict=True)])

    running, waiting = split(g.running, 1), split(g.waiting, 1)
    kv = repr(round(g.kv_usage, 4))
    gauge("vllm:num_requests_running", [f"{r}.0" for r in running])
    gauge("vllm:num_requests_waiting", [f"{w}.0" for w in waiting])
    gauge("vllm:gpu_cache_usage_perc", [kv] * ENGINES)
    gauge("vllm:kv_cache_usage_perc", [kv] * ENGINES)
    for name, total in (
        ("vllm:gpu_prefix_cache_queries", e.prefix_queries),
        ("vllm:gpu_prefix_cache_hits", e.prefix_hits),
        ("vllm:prefix_cache_queries", e.prefix_queries),
        ("vllm:prefix_cache_hits", e.prefix_hits),
        ("vllm:num_preemptions", 0.0),
        ("vllm:prompt_tokens", e.prompt),
        ("vllm:generation_tokens", e.generation),
    ):
        plain(name, total)
    if node.plan.role == "decode":  # speculative decoding runs on the decode pool only
        plain("vllm:spec_decode_num_drafts", e.drafts)
        plain("vllm:spec_decode_num_draft_tokens", e.draft_tokens)
        plain("vllm:spec_decode_num_accepted_tokens", e.accepted)
        per_pos = [split(e.accepted_per_pos[i]) for i in range(NUM_SPEC_TOKENS)]
        counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            [
                [
                    (f'{labels[engine]},position="{i}"', _tenths(per_pos[i][engine]))
                    for i in range(NUM_SPEC_TOKENS)
                ]
                for engine in range(ENGINES)
            ],
        )
    stop, length = split(e.finished_stop), split(e.finished_length)
    counter(
        "vllm:request_success",
        [
            [
                (f'{heads[i]},finished_reason="{reason}",{model}', value)
                for reason, value in (
                    ("stop", _tenths(stop[i])),
                    ("length", _tenths(length[i])),
                    ("abort", "0.0"),
                )
            ]
            for i in range(ENGINES)
        ],
    )
    finished = split(e.finished_stop + e.finished_length)
    e2e_s, queue_s = request_latencies_s(node)
    itl_count, itl_sum = split(e.itl_count), split(e.itl_sum, 1_000_000)
    # what the scenario drives: (count per engine in tenths, sum per engine in micros)
    driven: dict[str, tuple[list[int], list[int]]] = {
        "vllm:iteration_tokens_total": (
            [round(e.steps * 10)] * ENGINES,
            split(e.iteration_tokens, 1_000_000),
        ),
        "vllm:time_to_first_token_seconds": (split(e.ttft_count), split(e.ttft_sum, 1_000_000)),
        "vllm:inter_token_latency_seconds": (itl_count, itl_sum),
        "vllm:time_per_output_token_seconds": (itl_count, itl_sum),
        # the scoreboard reads these: the scenario's request latencies (engine_extras)
        "vllm:e2e_request_latency_seconds": (finished, [round(c / 10 * e2e_s * 1e6) for c in finished]),
        "vllm:request_queue_time_seconds": (finished, [round(c / 10 * queue_s * 1e6) for c in finished]),
    }
    # the rest follow the finished requests, with typical means
    typical = {
        "vllm:request_prompt_tokens": 3000.0,
        "vllm:request_generation_tokens": 900.0,
        "vllm:request_max_num_generation_tokens": 4096.0,
        "vllm:request_params_n": 1.0,
        "vllm:request_params_max_tokens": 4096.0,
        "vllm:time_per_prefill_token_request_seconds": 0.004,
        "vllm:e2e_request_latency_seconds": 42.0,
        "vllm:request_queue_time_seconds": 0.4,
        "vllm:request_inference_time_seconds": 41.0,
        "vllm:request_prefill_time_seconds": 0.9,
        "vllm:request_decode_time_seconds": 40.0,
    }
    for name, help_, buckets in VLLM_HISTOGRAMS:
        if name in driven:
            counts, sums = driven[name]
            out.extend(_histogram(name, help_, buckets, heads, model, counts, sums, created))
            continue
        # not read by any profile: redrawn every REFRESH_S (cheap pages for 128+ nodes)
        sums = [round(c / 10 * typical[name] * 1_000_000) for c in finished]
        out.append(cached(node, name, now, partial(_histogram_text, name, help_, buckets, heads, model,
                                                    finished, sums, created)))
    # the NIXL transfers of a disaggregated decode node, from the scenario's own request
    # counters (infertop/demo/engine_extras.py): the node's whole figures on engine 0
    out.extend(engine_extra_lines(node, labels[0], float(node.engine_started_at), latencies=False))
    out.extend(engine_info_lines(node, ENGINES))  # settings and health (pd_trouble.py)
    return page.text()
