"""The span rule: the session's $/1M, $/request, API-equivalent and spend ÷ API ratio set
spend and tokens of the same stretch against each other, never spend since the
reservation start against tokens seen since infertop started (issue 17)."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor

EPS = 1e-6
H = 3600.0
SATURDAY = dt.datetime(2026, 11, 28, tzinfo=dt.UTC).timestamp()  # off-peak all day
START = SATURDAY  # the reservation start
LAYOUT = f"""
[session]
reservation_start = "{dt.datetime.fromtimestamp(START, dt.UTC).isoformat()}"
duration_h = 3
[pricing]
gpu_hour_usd = 10.0
[[nodes]]
name = "d1"
gpus = 8
[[nodes]]
name = "d2"
gpus = 8
"""  # $160/h


def vllm_page(generation: float, prompt: float, finished: float) -> tuple[str, float]:
    """A vLLM page from a real prometheus_client registry, and when its counters began."""
    registry = CollectorRegistry()
    born = time.time()
    Counter("vllm:generation_tokens", "", ["engine"], registry=registry).labels("0").inc(generation)
    Counter("vllm:prompt_tokens", "", ["engine"], registry=registry).labels("0").inc(prompt)
    Counter("vllm:request_success", "", ["engine"], registry=registry).labels("0").inc(finished)
    Gauge("vllm:num_requests_running", "", ["engine"], registry=registry).labels("0").set(4)
    return generate_latest(registry).decode(), born


def test_counters_began_read_from_created_and_process_start() -> None:
    text, born = vllm_page(5000, 20000, 10)
    engine = engine_sample_from_text(text, "vllm")
    assert engine.counters_started_at == pytest.approx(born, abs=1.0)
    assert engine.generation_tokens_total == 5000
    # no _created series (multiprocess mode): the process start bounds it from below
    page = (
        "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 5\n"
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\n"
    )
    assert engine_sample_from_text(page, "vllm").counters_started_at == 1.7e9
    # both: the later one is the sharper (a counter cannot begin before its process)
    both = page + "# TYPE vllm:generation_tokens_created gauge\nvllm:generation_tokens_created 1.8e9\n"
    assert engine_sample_from_text(both, "vllm").counters_started_at == 1.8e9
    bare = "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 5\n"
    assert engine_sample_from_text(bare, "vllm").counters_started_at is None


def sample(node: str, at: float, gen: float, born: float | None) -> NodeSample:
    return NodeSample(
        node=node, source="scrape", taken_at=at,
        engine=EngineSample(generation_tokens_total=gen, prompt_tokens_total=2 * gen,
                            requests_finished_total=gen / 100, counters_started_at=born),
    )


def run(born: float | None, first_gen: float = 1_000_000.0) -> Monitor:
    """infertop starts 1 h into the reservation; each engine has produced `first_gen`
    tokens by then, and makes 1,000 more a second while infertop watches for 10 s."""
    t0 = START + H
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: t0)
    for step in range(11):
        for node in ("d1", "d2"):
            monitor.fleet.ingest(sample(node, t0 + step, first_gen + 1000.0 * step, born))
        monitor.tick(t0 + step)
    return monitor


def test_counters_born_after_the_reservation_start_count_whole() -> None:
    """The engines started 20 min into the reservation: all they counted is its tokens,
    and $/1M is the whole spend over all of them."""
    monitor = run(born=START + 1200.0)
    s = monitor.tick(START + H + 10).session
    spend = 160.0 * (H + 10) / H
    tokens = 2 * (1_000_000.0 + 10_000.0)
    assert s.spend_usd == pytest.approx(spend, abs=EPS)
    assert s.accepted_tokens == tokens
    assert s.usd_per_million_span == "reservation"
    assert s.tokens_since == dt.datetime.fromtimestamp(START, dt.UTC).isoformat()
    assert s.span_spend_usd == pytest.approx(spend, abs=EPS)
    assert s.usd_per_million_output_tokens == pytest.approx(spend / tokens * 1e6, rel=1e-9)
    assert s.requests_finished == pytest.approx(tokens / 100)
    assert s.usd_per_request == pytest.approx(spend / (tokens / 100), rel=1e-9)
    # off-peak Saturday: output $0.60/1M, prompt (no cache counter: all miss) $0.15/1M
    api = tokens * 0.60e-6 + 2 * tokens * 0.15e-6
    assert s.api_equivalent_usd == pytest.approx(api, rel=1e-9)
    assert s.api_break_even_ratio == pytest.approx(spend / api, rel=1e-9)


@pytest.mark.parametrize("born", [START - 600.0, None], ids=["born-before", "not-said"])
def test_counters_born_before_the_reservation_start_count_from_first_sight(born: float | None) -> None:
    """The engines ran before the reservation (or do not say since when): what their
    counters held at first sight belongs to no known stretch. $/1M is over the stretch
    infertop counted, and says so — not an hour's spend over ten seconds of tokens."""
    monitor = run(born=born)
    s = monitor.tick(START + H + 10).session
    assert s.spend_usd == pytest.approx(160.0 * (H + 10) / H, abs=EPS)
    tokens = 2 * 10_000.0
    span_spend = 160.0 * 10 / H
    assert s.accepted_tokens == tokens
    assert s.usd_per_million_span == "watched"
    assert s.tokens_since == dt.datetime.fromtimestamp(START + H, dt.UTC).isoformat()
    assert s.span_spend_usd == pytest.approx(span_spend, abs=EPS)
    assert s.usd_per_million_output_tokens == pytest.approx(span_spend / tokens * 1e6, rel=1e-9)
    # the session figure agrees with the marginal one: the same cluster at the same rate
    assert s.usd_per_million_output_tokens == pytest.approx(160.0 / (2000.0 * H) * 1e6, rel=1e-9)
    api = tokens * 0.60e-6 + 2 * tokens * 0.15e-6
    assert s.api_equivalent_usd == pytest.approx(api, rel=1e-9)
    assert s.api_break_even_ratio == pytest.approx(span_spend / api, rel=1e-9)


def test_a_node_first_read_later_starts_the_stretch_again() -> None:
    """d2 answers only 5 s after d1: the tokens d1 made before are not set against
    spend that d2's unseen tokens also belong to; the stretch starts at d2's first reading."""
    t0 = START + H
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: t0)
    for step in range(11):
        monitor.fleet.ingest(sample("d1", t0 + step, 1000.0 * step, None))
        if step >= 5:
            monitor.fleet.ingest(sample("d2", t0 + step, 7e6 + 1000.0 * step, None))
        s = monitor.tick(t0 + step).session
    assert s.tokens_since == dt.datetime.fromtimestamp(t0 + 5, dt.UTC).isoformat()
    assert s.accepted_tokens == 2 * 5000.0
    assert s.span_spend_usd == pytest.approx(160.0 * 5 / H, abs=EPS)


def test_the_span_survives_a_restart() -> None:
    from infertop.monitor.evaluation.ledger import SessionLedger

    monitor = run(born=None)
    ledger = monitor.ledger
    restored = SessionLedger.from_state(ledger.to_state())
    assert restored.view(START + H + 10) == ledger.view(START + H + 10)


def test_a_birth_no_engine_could_have_is_not_believed() -> None:
    """A page that says its counters began a second ago yet hold 1e15 tokens (or began in
    the future) is not counted whole: counting starts at first sight, with a note."""
    t0 = START + H
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: t0)
    monitor.fleet.ingest(sample("d1", t0, 1e15, born=t0 - 1.0))
    monitor.fleet.ingest(sample("d2", t0, 5.0, born=t0 + 60.0))
    s = monitor.tick(t0).session
    assert s.usd_per_million_span == "watched" and not s.accepted_tokens
    assert any("could not have been counted" in n for n in s.notes)
