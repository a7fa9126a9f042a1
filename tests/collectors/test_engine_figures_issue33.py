"""The three engine figures a real vLLM showed wrong (issue 33), on the lines and counters
that showed it: full acceptance with a drafter that does not always draft, a log's
tokens/s read by a monitor running late, and latency percentiles that vanished."""

from __future__ import annotations

from infertop.collectors.probe.log_parsers import VllmParser
from infertop.collectors.probe.logs import LogFigures
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.monitor.evaluation.figures import NO_LATENCY_READING, engine_view


def _sample(at: float, **engine: object) -> NodeSample:
    return NodeSample(node="n", source="scrape", taken_at=at, engine=EngineSample(**engine))  # type: ignore[arg-type]


def test_full_acceptance_counts_the_steps_that_drafted_nothing() -> None:
    # an n-gram window as a real vLLM counted it: 8 requests, most steps drafting k = 3
    # tokens, some finding no n-gram match (no draft: one token produced either way), and
    # each request's first token made by its prefill, without a draft
    k, drafted_steps, undrafted_steps, first_tokens, accepted = 3, 1000, 1500, 8, 2070
    generated = drafted_steps + accepted + undrafted_steps + first_tokens
    start = _sample(0.0, drafts_total=0, draft_tokens_total=0, accepted_tokens_total=0, generation_tokens_total=0)
    end = _sample(
        10.0, drafts_total=drafted_steps, draft_tokens_total=drafted_steps * k,
        accepted_tokens_total=accepted, generation_tokens_total=generated,
    )
    view = engine_view([start, end], now=10.0)
    assert view is not None and view.accepted_tokens_per_s is not None
    # had every draft token been accepted: k + 1 per drafting step, 1 per other step
    truth = (drafted_steps * (k + 1) + undrafted_steps + first_tokens) / 10.0
    assert view.full_acceptance_tokens_per_s == truth
    assert view.full_acceptance_tokens_per_s >= view.accepted_tokens_per_s
    # the old (drafts + draft tokens)/s read 27 % low, below the accepted figure
    assert (drafted_steps + drafted_steps * k) / 10.0 < view.accepted_tokens_per_s


def test_full_acceptance_with_mtp_is_drafts_plus_draft_tokens_plus_first_tokens() -> None:
    # MTP: every decode step drafts; only the prefill's first token of a request has none
    k, steps, requests, accepted = 1, 5000, 40, 2600
    generated = steps + accepted + requests
    start = _sample(0.0, drafts_total=0, draft_tokens_total=0, accepted_tokens_total=0, generation_tokens_total=0)
    end = _sample(10.0, drafts_total=steps, draft_tokens_total=steps * k, accepted_tokens_total=accepted,
                  generation_tokens_total=generated)
    view = engine_view([start, end], now=10.0)
    assert view is not None
    assert view.full_acceptance_tokens_per_s == (steps + steps * k + requests) / 10.0


def test_full_acceptance_is_unknown_without_the_generated_tokens() -> None:
    start = _sample(0.0, drafts_total=0, draft_tokens_total=0, accepted_tokens_total=0)
    end = _sample(10.0, drafts_total=100, draft_tokens_total=300, accepted_tokens_total=200)
    view = engine_view([start, end], now=10.0)
    assert view is not None and view.draft_acceptance is not None
    assert view.full_acceptance_tokens_per_s is None


def _stats_line(stamp_s: int, gen_tps: float, prompt_tps: float = 0.0) -> str:
    mm, ss = divmod(stamp_s, 60)
    return (
        f"(APIServer pid=7) INFO 12-06 02:{mm:02d}:{ss:02d} [loggers.py:257] Engine 000: Avg prompt "
        f"throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: {gen_tps:.1f} tokens/s, "
        "Running: 8 reqs, Waiting: 0 reqs, CPU KV cache usage: 3.1%, Prefix cache hit rate: 0.0%"
    )


def _log_view(lines_by_read: list[tuple[float, list[str]]]):
    figures = LogFigures([VllmParser()])
    samples = []
    for read_at, lines in lines_by_read:
        for line in lines:
            figures.feed(line, read_at)
        samples.append(NodeSample(node="n", source="log", taken_at=read_at,
                                  engine=EngineSample(**figures.engine("vllm"))))
    return engine_view(samples, now=samples[-1].taken_at)


def test_log_tokens_per_s_are_the_lines_own_over_the_window_however_late_they_are_read() -> None:
    # lines every 2 s; the monitor reads late and unevenly (a loaded host): 9.2 s of its
    # time holds four lines (8 s of the log's). The figure is the lines' own, time-weighted
    # over their intervals, not their tokens over the monitor's read times (−13 % here)
    tps = [2404.0, 3148.0, 2877.0, 2650.0, 3010.0]
    prompt = [100.0, 300.0, 200.0, 200.0, 100.0]
    lines = [_stats_line(2 * i, g, p) for i, (g, p) in enumerate(zip(tps, prompt, strict=True))]
    view = _log_view([(100.7, lines[:2]), (103.1, [lines[2]]), (109.9, lines[3:])])
    assert view is not None and view.accepted_tokens_per_s is not None
    window_truth = sum(tps[2:]) / 3  # equal intervals: the mean of the lines read in the window
    assert abs(view.accepted_tokens_per_s / window_truth - 1) < 0.05
    assert min(tps[2:]) <= view.accepted_tokens_per_s <= max(tps[2:])
    assert view.prompt_tokens_per_s == sum(prompt[2:]) / 3
    # the log gives neither steps nor finished requests: unknown, not 0
    assert view.decode_steps_per_s is None and view.requests_finished_per_s is None


def test_an_idle_stretch_the_log_left_out_counts_as_zero_throughput() -> None:
    # vLLM prints no stats line while idle (debug level): 20 s of silence between lines 2 s
    # apart count as covered, at zero tokens, when the next line comes
    lines = [_stats_line(0, 1000.0), _stats_line(2, 1000.0), _stats_line(4, 1000.0), _stats_line(26, 1000.0)]
    view = _log_view([(10.0, lines[:1]), (20.0, lines[1:3]), (50.0, lines[3:])])
    assert view is not None and view.accepted_tokens_per_s is not None
    # 3 lines × 2 s × 1000 tokens over the 2 + 2 + 22 s the log's clock moved
    assert abs(view.accepted_tokens_per_s - 6000.0 / 26.0) < 1e-6


BUCKETS = ((0.1, 3.0), (0.5, 9.0), (float("inf"), 10.0))


def test_latency_read_once_in_a_window_says_so() -> None:
    samples = [_sample(float(t), generation_tokens_total=100.0 * t) for t in range(4)]
    samples[2] = _sample(2.0, generation_tokens_total=200.0, latency_buckets={"ttft": BUCKETS, "itl": BUCKETS})
    view = engine_view(samples, now=3.0)
    assert view is not None
    assert view.ttft_p99_s is None and view.latency_note == NO_LATENCY_READING
    # two readings: percentiles, and no note
    samples[3] = _sample(3.0, generation_tokens_total=300.0,
                         latency_buckets={"ttft": ((0.1, 5.0), (0.5, 12.0), (float("inf"), 14.0)), "itl": BUCKETS})
    view = engine_view(samples, now=3.0)
    assert view is not None and view.ttft_p99_s is not None and view.latency_note is None
    # an engine that publishes no latency buckets (a log source): no note either
    view = engine_view([_sample(0.0, generation_tokens_total=0.0), _sample(1.0, generation_tokens_total=5.0)],
                       now=1.0)
    assert view is not None and view.latency_note is None
