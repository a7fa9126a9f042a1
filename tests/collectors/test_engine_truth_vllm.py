"""vLLM figures against the truth a page built from vLLM 0.33.0's definitions was driven
with (tests/fixtures/vllm_page.py): within 2 %."""

from __future__ import annotations

import pytest

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.monitor.evaluation.figures import engine_view
from infertop.monitor.snapshot import EngineView
from tests.support.vllm_page import SimulatedVllmPage

DT = 10.0


def _window(server: SimulatedVllmPage, **advance: object) -> tuple[EngineSample, EngineSample, EngineView]:
    before = engine_sample_from_text(server.page(), "vllm")
    server.advance(DT, **advance)  # type: ignore[arg-type]
    after = engine_sample_from_text(server.page(), "vllm")
    samples = [NodeSample(node="n", source="scrape", taken_at=t, engine=e)
               for t, e in ((1000.0, before), (1000.0 + DT, after))]
    view = engine_view(samples, now=1000.0 + DT)
    assert view is not None
    return before, after, view


def test_cached_prompt_tokens_count_kv_arriving_from_the_prefill_pool() -> None:
    # a disaggregated decode node: 90 % of its prompt KV arrives over the KV connector
    server = SimulatedVllmPage(engines=4, external_share=0.9)
    server.advance(20.0)
    sample = engine_sample_from_text(server.page(), "vllm")
    cached = sum(e.local_cache_hit + e.external_kv_transfer for e in server.engines)
    assert sample.prompt_cached_tokens_total == pytest.approx(cached, rel=0.02)
    local_only = sum(e.local_cache_hit for e in server.engines)
    assert sample.prompt_cached_tokens_total > 5 * local_only  # what the old name said


def test_finished_requests_are_stop_and_length_aborts_apart() -> None:
    server = SimulatedVllmPage(engines=8, seed=3)
    server.advance(30.0)
    before = [dict(e.finished) for e in server.engines]
    _, _, view = _window(server)
    def per_s(*reasons: str) -> float:
        return sum(e.finished[r] - b[r] for e, b in zip(server.engines, before, strict=True)
                   for r in reasons) / DT
    assert view.requests_finished_per_s == pytest.approx(per_s("stop", "length"), rel=0.02)
    assert view.requests_aborted_per_s == pytest.approx(per_s("abort", "error", "repetition"), rel=0.02)


def test_decode_steps_are_the_lockstep_rate_with_idle_engines() -> None:
    # vLLM observes its step histogram only for steps with output: with 2 of 8 wide-EP
    # engines idle the mean count moves at the lockstep rate × 6/8; the figure is the
    # fastest engine's rate, the group's (docs/engines.md)
    server = SimulatedVllmPage(engines=8)
    server.advance(10.0)
    _, _, view = _window(server, steps_per_s=30.0)
    assert view.decode_steps_per_s == pytest.approx(30.0, rel=0.02)
    before, after, view = _window(server, steps_per_s=30.0, idle=(6, 7))
    assert view.decode_steps_per_s == pytest.approx(30.0, rel=0.02)
    assert before.steps_total is not None and after.steps_total is not None
    assert (after.steps_total - before.steps_total) / DT == pytest.approx(30.0 * 6 / 8, rel=0.02)
    assert after.steps_by_engine_total is not None and len(after.steps_by_engine_total) == 8


def test_page_has_no_removed_names_and_kv_use_is_read() -> None:
    server = SimulatedVllmPage(engines=2)
    server.advance(5.0)
    text = server.page()
    assert "vllm:gpu_cache_usage_perc" not in text
    sample = engine_sample_from_text(text, "vllm")
    assert sample.kv_cache_usage == pytest.approx(sum(e.kv_cache_usage for e in server.engines) / 2)
