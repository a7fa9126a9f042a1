"""Latency percentiles, cache and KV-transfer figures from real `prometheus_client`
pages with the engines' own bucket sets, observed at known values: each percentile must
fall in the bucket that holds the truth, and say that bucket's bounds.

Bucket sets as upstream writes them: vLLM `vllm/v1/metrics/loggers.py` (v0.10/0.11 era,
ITL 0.01/0.025/0.05/0.075…; the same in later releases read in late 2026) and SGLang
`python/sglang/srt/observability/metrics_collector.py` (0.4/0.5 era, ITL 0.002…8 s).
"""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import NodeSample
from infertop.monitor.evaluation.figures import engine_fields, engine_view, per_gpu_and_user
from infertop.monitor.evaluation.goodput import ShareBounds, share_bounds
from infertop.monitor.evaluation.latency import percentile, window_increase
from infertop.monitor.evaluation.scoreboard import pool_scoreboard
from infertop.monitor.snapshot import EngineView, NodeView

VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0]
VLLM_REQUEST = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
SGLANG_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
              0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0]
SGLANG_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]


class VllmEngine:
    """A vLLM V1 page with two data-parallel engines (the `engine` label)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        r = self.registry
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "", labels, buckets=VLLM_TTFT, registry=r)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "", labels, buckets=VLLM_ITL, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "", labels, buckets=VLLM_REQUEST,
                             registry=r)
        self.queue = Histogram("vllm:request_queue_time_seconds", "", labels, buckets=VLLM_REQUEST,
                               registry=r)
        self.gen = Counter("vllm:generation_tokens", "", labels, registry=r)
        self.prompt = Counter("vllm:prompt_tokens", "", labels, registry=r)
        self.queries = Counter("vllm:prefix_cache_queries", "", labels, registry=r)
        self.hits = Counter("vllm:prefix_cache_hits", "", labels, registry=r)
        self.ext_queries = Counter("vllm:external_prefix_cache_queries", "", labels, registry=r)
        self.ext_hits = Counter("vllm:external_prefix_cache_hits", "", labels, registry=r)
        self.preempt = Counter("vllm:num_preemptions", "", labels, registry=r)
        self.running = Gauge("vllm:num_requests_running", "", labels, registry=r)
        self.nixl_bytes = Histogram("vllm:nixl_bytes_transferred", "", labels,
                                    buckets=[2**k for k in range(11, 35, 2)], registry=r)
        self.nixl_time = Histogram("vllm:nixl_xfer_time_seconds", "", labels,
                                   buckets=[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], registry=r)
        self.nixl_failed = Counter("vllm:nixl_num_failed_transfers", "", labels, registry=r)
        # vLLM creates every engine's series at start (make_per_engine), so they read 0
        for metric in (self.ttft, self.itl, self.e2e, self.queue, self.gen, self.prompt,
                       self.queries, self.hits, self.ext_queries, self.ext_hits, self.preempt,
                       self.running, self.nixl_bytes, self.nixl_time, self.nixl_failed):
            for e in ("0", "1"):
                metric.labels("m", e)

    def page(self) -> str:
        return generate_latest(self.registry).decode()

    def sample(self, t: float) -> NodeSample:
        return NodeSample(node="d1", source="scrape", taken_at=t,
                          engine=engine_sample_from_text(self.page(), "vllm"))


def observe(hist: Histogram, engine: str, value: float, n: int) -> None:
    for _ in range(n):
        hist.labels("m", engine).observe(value)


def test_vllm_percentiles_fall_in_the_bucket_that_holds_the_truth() -> None:
    eng = VllmEngine()
    # before the window: slow requests that must not count
    observe(eng.itl, "0", 0.3, 500)
    observe(eng.ttft, "1", 30.0, 500)
    first = eng.sample(100.0)
    # in the window, split over both engines: ITL 30 ms for 98 %, 60 ms for 2 %
    observe(eng.itl, "0", 0.03, 490)
    observe(eng.itl, "1", 0.03, 490)
    observe(eng.itl, "1", 0.06, 20)
    observe(eng.ttft, "0", 0.07, 99)
    observe(eng.ttft, "1", 3.0, 1)
    observe(eng.e2e, "0", 12.0, 100)
    observe(eng.queue, "1", 0.1, 100)
    view = engine_view([first, eng.sample(110.0)], now=110.0)
    assert view is not None
    assert view.latency_requests["itl"] == 1000
    assert 0.025 <= view.itl_p50_s <= 0.05  # type: ignore[operator]
    assert view.latency_bounds_s["itl_p50"] == (0.025, 0.05)
    assert 0.05 <= view.itl_p99_s <= 0.075  # type: ignore[operator]
    assert view.latency_bounds_s["itl_p99"] == (0.05, 0.075)
    assert 0.06 <= view.ttft_p50_s <= 0.08  # type: ignore[operator]
    assert view.latency_bounds_s["ttft_p99"] == (0.06, 0.08)  # 99 of 100 at 70 ms
    assert 10.0 <= view.e2e_p50_s <= 15.0  # type: ignore[operator]
    assert view.latency_bounds_s["queue_p99"] == (0.0, 0.3)
    assert 0.0 <= view.queue_p99_s <= 0.3  # type: ignore[operator]


def test_unknown_without_a_window_and_with_no_requests() -> None:
    eng = VllmEngine()
    observe(eng.itl, "0", 0.03, 10)
    only = engine_view([eng.sample(1.0)], now=1.0)
    assert only is not None and only.itl_p50_s is None and only.itl_p99_s is None
    idle = engine_view([eng.sample(1.0), eng.sample(2.0)], now=2.0)
    assert idle is not None and idle.itl_p50_s is None  # no request in the window: unknown
    assert idle.latency_requests["itl"] == 0


def test_a_restart_within_the_window_counts_from_zero() -> None:
    before = VllmEngine()
    observe(before.itl, "0", 0.3, 1000)
    a = before.sample(0.0)
    after = VllmEngine()  # the engine restarted: its histogram starts again
    observe(after.itl, "0", 0.03, 40)
    b = after.sample(5.0)
    observe(after.itl, "0", 0.03, 60)
    c = after.sample(10.0)
    view = engine_view([a, b, c], now=10.0)
    assert view is not None
    assert view.latency_requests["itl"] == 100  # 40 since the restart, then 60
    assert view.latency_bounds_s["itl_p99"] == (0.025, 0.05)


def test_cache_preemption_and_nixl_rates() -> None:
    eng = VllmEngine()
    first = eng.sample(0.0)
    eng.queries.labels("m", "0").inc(10_000)
    eng.hits.labels("m", "0").inc(6_000)
    eng.queries.labels("m", "1").inc(10_000)
    eng.hits.labels("m", "1").inc(2_000)
    eng.ext_queries.labels("m", "0").inc(4_000)
    eng.ext_hits.labels("m", "0").inc(1_000)
    eng.preempt.labels("m", "1").inc(5)
    for _ in range(10):
        eng.nixl_bytes.labels("m", "0").observe(50e6)
        eng.nixl_time.labels("m", "0").observe(0.02)
    eng.nixl_failed.labels("m", "0").inc(1)
    view = engine_view([first, eng.sample(10.0)], now=10.0)
    assert view is not None
    assert view.prefix_cache_hit_rate == pytest.approx(0.4)
    assert view.external_prefix_cache_hit_rate == pytest.approx(0.25)
    assert view.preemptions_per_s == pytest.approx(0.5)
    assert view.kv_transfer_bytes_per_s == pytest.approx(50e6)
    assert view.kv_transfer_mean_s == pytest.approx(0.02)
    assert view.kv_transfer_failures_per_s == pytest.approx(0.1)


def test_tokens_per_gpu_and_per_user_node_and_pool() -> None:
    nodes = []
    windows = {}
    for running, tokens in ((4, 10_000), (12, 20_000)):
        eng = VllmEngine()
        eng.running.labels("m", "0").set(running)
        first = eng.sample(0.0)
        eng.gen.labels("m", "0").inc(tokens)
        observe(eng.itl, "0", 0.03 if running == 4 else 0.3, 100)
        made = engine_fields([first, eng.sample(10.0)], now=10.0)
        assert made is not None
        fields, windows[f"d{running}"] = made
        view = EngineView(**{**fields, **per_gpu_and_user(fields, gpus=8)})
        nodes.append(NodeView(name=f"d{running}", role="decode", status="ok", engine=view,
                              gpus_expected=8))
    a, b = (n.engine for n in nodes)
    assert a is not None and b is not None
    assert a.output_tokens_per_s_per_gpu == pytest.approx(1000 / 8)
    assert a.output_tokens_per_s_per_user == pytest.approx(1000 / 4)
    assert b.output_tokens_per_s_per_user == pytest.approx(2000 / 12)
    pool = pool_scoreboard(nodes, windows, ttft_target_s=None, itl_target_s=0.05)
    assert pool["output_tokens_per_s_per_gpu"] == pytest.approx(3000 / 16)
    assert pool["output_tokens_per_s_per_user"] == pytest.approx(3000 / 16)
    # the pool's percentiles come from the summed buckets: half at 30 ms, half at 300 ms
    assert pool["latency_requests"]["itl"] == 200
    assert pool["latency_bounds_s"]["itl_p99"] == (0.2, 0.3)
    assert pool["latency_bounds_s"]["itl_p50"][1] <= 0.05
    assert pool["slo_itl_attainment"] == pytest.approx(0.5)  # 50 ms is a bucket bound: exact
    assert pool["slo_itl_attainment_high"] == pytest.approx(0.5)


def test_sglang_page_with_tp_ranks_and_pd_transfer() -> None:
    def page(itl_fast: int, itl_slow: int, retracted: float, mb: float, balance: list[float]) -> str:
        reg = CollectorRegistry()
        eplb = Summary("sglang:eplb_balancedness", "", ["model_name", "forward_mode"], registry=reg)
        for b in balance:
            eplb.labels("m", "decode").observe(b)
        labels = ["model_name", "tp_rank"]
        itl = Histogram("sglang:inter_token_latency_seconds", "", labels, buckets=SGLANG_ITL, registry=reg)
        ttft = Histogram("sglang:time_to_first_token_seconds", "", labels, buckets=SGLANG_TTFT,
                         registry=reg)
        Counter("sglang:num_retracted_requests", "", labels, registry=reg).labels("m", "0").inc(retracted)
        size = Histogram("sglang:kv_transfer_total_mb", "", labels, registry=reg)
        size.labels("m", "0").observe(mb)
        Gauge("sglang:kv_transfer_speed_gb_s", "", labels, registry=reg).labels("m", "0").set(12.5)
        Gauge("sglang:kv_transfer_latency_ms", "", labels, registry=reg).labels("m", "0").set(40)
        Counter("sglang:generation_tokens", "", labels, registry=reg).labels("m", "0").inc(1)
        for rank in ("0", "1"):
            for _ in range(itl_fast):
                itl.labels("m", rank).observe(0.012)
            for _ in range(itl_slow):
                itl.labels("m", rank).observe(0.5)
            ttft.labels("m", rank).observe(0.5)
        return generate_latest(reg).decode()

    a = NodeSample(node="s", source="scrape", taken_at=0.0,
                   engine=engine_sample_from_text(page(10, 0, 2, 100.0, [0.9]), "sglang"))
    b = NodeSample(node="s", source="scrape", taken_at=10.0,
                   engine=engine_sample_from_text(page(10 + 495, 5, 12, 300.0, [0.9, 0.6, 0.7]), "sglang"))
    view = engine_view([a, b], now=10.0)
    assert view is not None
    assert view.latency_requests["itl"] == 1000  # both TP ranks' buckets summed
    assert view.latency_bounds_s["itl_p50"] == (0.01, 0.015)
    assert view.latency_bounds_s["itl_p99"] == (0.01, 0.015)
    assert view.preemptions_per_s == pytest.approx(1.0)
    assert view.kv_transfer_bytes_per_s == pytest.approx(200e6 / 10)
    assert view.kv_transfer_speed_bytes_per_s == pytest.approx(12.5e9)
    assert view.kv_transfer_latency_s == pytest.approx(0.04)
    assert view.expert_balancedness == pytest.approx(0.65)  # the window's two: (0.6 + 0.7) / 2


@pytest.mark.parametrize(("q", "lower", "upper"), [(0.5, 0.025, 0.05), (0.9, 0.05, 0.075),
                                                   (0.999, 0.075, None)])
def test_percentile_interpolates_within_its_bucket(q: float, lower: float, upper: float | None) -> None:
    buckets = ((0.01, 0.0), (0.025, 100.0), (0.05, 600.0), (0.075, 995.0), (math.inf, 1000.0))
    p = percentile(buckets, q)
    assert p is not None and p.lower_s == lower and p.upper_s == upper
    if upper is not None:
        assert lower <= p.value_s <= upper
    # 0.5 × 1000 = rank 500: 400 of the 500 in the 25–50 ms bucket, 4/5 of its width
    if q == 0.5:
        assert p.value_s == pytest.approx(0.025 + 0.025 * 0.8)


def test_share_bounds_and_window_increase() -> None:
    a = ((0.1, 10.0), (1.0, 20.0), (math.inf, 20.0))
    b = ((0.1, 60.0), (1.0, 120.0), (math.inf, 130.0))
    inc = window_increase([a, b])
    assert inc == ((0.1, 50.0), (1.0, 100.0), (math.inf, 110.0))
    assert share_bounds(inc, 0.1) == ShareBounds(50 / 110, 50 / 110)
    # inside a bucket: between its bounds' counts, never a point interpolated inside it
    assert share_bounds(inc, 0.55) == ShareBounds(50 / 110, 100 / 110, (0.1, 1.0))
    assert share_bounds(inc, 5.0) == ShareBounds(100 / 110, 1.0, (1.0, None))  # the +Inf bucket
    # another bucket set starts a new run
    other = ((0.5, 1.0), (math.inf, 1.0))
    assert window_increase([other, a, b]) == inc
    assert window_increase([a, other]) is None
    # the same number of buckets with other bounds (a restart with another bucket set)
    same_size = ((0.2, 1.0), (2.0, 1.0), (math.inf, 1.0))
    assert window_increase([same_size, a, b]) == inc
    assert window_increase([a, same_size]) is None
    # readings without buckets (rounds that skip them) are passed over, not a new run:
    # the increase is from the first known reading to the last, wherever the gaps are
    assert window_increase([a, None, None, b]) == inc
    assert window_increase([None, a, None, b, None]) == inc
    assert window_increase([a, None]) is None  # one known reading is no increase
    assert window_increase([None, None]) is None
    # a restart across a gap: the reading after it counts from zero
    restarted = ((0.1, 5.0), (1.0, 5.0), (math.inf, 6.0))
    assert window_increase([a, None, b, None, restarted]) == ((0.1, 55.0), (1.0, 105.0), (math.inf, 116.0))
