"""SGLang figures against the truth a page built from SGLang 0.5.23's definitions was driven
with (tests/fixtures/sglang_page.py): every figure within 2 %."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import NodeSample
from infertop.monitor.evaluation.figures import engine_view
from tests.support.sglang_page import SglangServer

DT = 10.0


def _views(server: SglangServer, **advance: object):
    before = engine_sample_from_text(server.page(), "sglang")
    truth_before = [(r.decode_passes, r.decode_tokens) for r in server.truth.ranks]
    requests_before = (server.truth.requests_finished, server.truth.requests_aborted)
    server.advance(DT, **advance)  # type: ignore[arg-type]
    after = engine_sample_from_text(server.page(), "sglang")
    samples = [NodeSample(node="n", source="scrape", taken_at=t, engine=e)
               for t, e in ((1000.0, before), (1000.0 + DT, after))]
    view = engine_view(samples, now=1000.0 + DT)
    assert view is not None
    steps = [(r.decode_passes - p) / DT for r, (p, _) in zip(server.truth.ranks, truth_before, strict=True)]
    tokens = sum(r.decode_tokens - t for r, (_, t) in zip(server.truth.ranks, truth_before, strict=True)) / DT
    finished = (server.truth.requests_finished - requests_before[0]) / DT
    aborted = (server.truth.requests_aborted - requests_before[1]) / DT
    assert view.requests_finished_per_s == pytest.approx(finished, rel=0.02)
    assert view.requests_aborted_per_s == pytest.approx(aborted, rel=0.02, abs=1e-9)
    return view, after, steps, tokens


@pytest.mark.parametrize(("dp", "tp", "all_schedulers", "priority"), [
    (8, 8, False, False),  # DP attention, wide EP: one scheduler per DP rank
    (8, 8, True, True),  # … with priority scheduling and metrics for all schedulers
    (1, 8, False, False),  # plain TP 8: every rank counts its passes
    (1, 8, True, True),  # plain TP 8, every rank exports, priority scheduling
])
def test_sglang_figures_match_truth(dp: int, tp: int, all_schedulers: bool, priority: bool) -> None:
    server = SglangServer(dp=dp, tp=tp, priority=priority, all_schedulers=all_schedulers, seed=dp + tp)
    server.advance(30.0)  # history before the window
    view, sample, steps, tokens = _views(server)
    ranks = server.truth.ranks
    # decode passes only (prefill passes are not decode steps), one TP rank per engine,
    # averaged over DP engines that step in lockstep
    assert view.decode_steps_per_s == pytest.approx(sum(steps) / len(steps), rel=0.02)
    # live decode tokens, not the tokens of requests that happened to finish
    assert view.accepted_tokens_per_s == pytest.approx(tokens, rel=0.02)
    assert view.requests_running == pytest.approx(sum(r.running for r in ranks), rel=0.02)
    assert view.requests_waiting == pytest.approx(sum(r.waiting for r in ranks), rel=0.02)
    assert view.kv_cache_usage == pytest.approx(sum(r.token_usage for r in ranks) / len(ranks), rel=0.02)
    # acceptance: the engines' gauges, weighted (every DP rank verified as many drafts)
    rate = sum(r.accept_rate for r in ranks) / len(ranks)
    length = sum(r.accept_length for r in ranks) / len(ranks)
    assert view.draft_acceptance == pytest.approx(rate, rel=0.02)
    assert view.mean_acceptance_length == pytest.approx(length, rel=0.02)
    assert sample.spec_accept_length is not None and sample.spec_accept_length > 1


def test_sglang_acceptance_unknown_without_speculative_decoding() -> None:
    server = SglangServer(dp=4, tp=4, spec=False)
    server.advance(10.0)
    view, sample, _, _ = _views(server)
    # SGLang writes 0 into both gauges with speculative decoding off: unknown, not 0 %
    assert sample.spec_accept_rate is None and sample.spec_accept_length is None
    assert view.draft_acceptance is None and view.mean_acceptance_length is None


def test_sglang_idle_rank_does_not_slow_the_lockstep_rate() -> None:
    # an idle DP rank counts no decode passes (its idle batches are not decode passes)
    server = SglangServer(dp=4, tp=4)
    server.advance(10.0)
    view, _, steps, _ = _views(server, idle_ranks=(3,))
    assert steps[3] == 0
    assert view.decode_steps_per_s == pytest.approx(max(steps), rel=0.02)


def test_sglang_acceptance_unknown_while_the_engine_idles() -> None:
    # the gauges keep the figures of the last busy interval: not a figure of an idle window
    server = SglangServer(dp=2, tp=2)
    server.advance(10.0)
    view, sample, _, tokens = _views(server, idle_ranks=(0, 1))
    assert tokens == 0 and sample.spec_accept_rate is not None
    assert view.draft_acceptance is None and view.mean_acceptance_length is None


def test_spec_gauges_are_weighted_by_the_verify_calls_of_their_labels() -> None:
    # one page with two servers told apart by --extra-metric-labels (a federating page):
    # each server's gauges weigh as many verify calls as that server made
    reg = CollectorRegistry()
    sched = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "replica"]
    rate = Gauge("sglang:spec_accept_rate", "rate", sched, registry=reg, multiprocess_mode="mostrecent")
    length = Gauge("sglang:spec_accept_length", "length", sched, registry=reg, multiprocess_mode="mostrecent")
    verify = Counter("sglang:spec_verify_calls_total", "verify", ["model_name", "engine_type", "replica"],
                     registry=reg)
    running = Gauge("sglang:num_running_reqs", "running", sched, registry=reg)
    for replica, (r, n, calls) in {"a": (0.8, 3.4, 3000), "b": (0.5, 2.5, 1000)}.items():
        labels = {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                  "moe_ep_rank": "0", "replica": replica}
        rate.labels(**labels).set(r)
        length.labels(**labels).set(n)
        running.labels(**labels).set(1)
        verify.labels(model_name="m", engine_type="unified", replica=replica).inc(calls)
    sample = engine_sample_from_text(generate_latest(reg).decode(), "sglang")
    assert sample.spec_accept_rate == pytest.approx((0.8 * 3000 + 0.5 * 1000) / 4000)
    assert sample.spec_accept_length == pytest.approx((3.4 * 3000 + 2.5 * 1000) / 4000)
