"""Engine log parsing and accumulation (collectors/probe/logs.py) on real-format lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.collectors.probe.log_parsers import PatternParser, VllmParser
from infertop.collectors.probe.logs import LogFigures, LogWatch
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.monitor.evaluation.figures import engine_view

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"


def figures_from(name: str, parsers: list | None = None, interval_s: float | None = None) -> LogFigures:
    figures = LogFigures(parsers if parsers is not None else [VllmParser()], interval_s)
    for i, line in enumerate((FIXTURES / name).read_text(encoding="utf-8").splitlines()):
        figures.feed(line, 1000.0 + i)
    return figures


def test_v1_lines_accumulate_into_counters() -> None:
    f = figures_from("vllm_v1_spec.log")
    c = f.counters
    assert c["accepted_tokens"] == 92 + 120 + 150
    assert c["draft_tokens"] == 259 + 350 + 420
    # Drafted ÷ 7 positions, which agrees with accepted ÷ (mean length − 1)
    assert c["drafts"] == 37 + 50 + 60
    # throughput × the 10 s interval learnt from the line stamps
    assert c["generation_tokens"] == pytest.approx((12.9 + 17.0 + 21.0) * 10)
    assert c["prompt_tokens"] == pytest.approx((93.9 + 0.0 + 51.2) * 10)
    engine = f.engine("vllm")
    assert engine["requests_running"] == 3
    assert engine["requests_waiting"] == 0
    assert engine["kv_cache_usage"] == pytest.approx(0.02)
    assert f.lines_parsed == 6
    assert f.lines_skipped == 0  # access lines, warnings and start-up lines are not ours


def test_counters_give_the_acceptance_the_lines_imply() -> None:
    """The same derivations as for a metrics endpoint, over samples taken between lines."""
    lines = (FIXTURES / "vllm_v1_spec.log").read_text().splitlines()
    figures = LogFigures([VllmParser()])
    samples = []
    t = 0.0
    for line in lines:
        figures.feed(line, t)
        if "SpecDecoding" in line:
            t += 10.0
            samples.append(
                NodeSample(node="n", source="ssh", taken_at=t, engine=EngineSample(**figures.engine("vllm")))
            )
    view = engine_view(samples, now=t)
    assert view is not None
    # between the first and last sample: the 2nd and 3rd intervals' counts
    assert view.draft_acceptance == pytest.approx((120 + 150) / (350 + 420))
    assert view.mean_acceptance_length == pytest.approx(1 + (120 + 150) / (50 + 60))
    assert view.accepted_tokens_per_s == pytest.approx((170 + 210) / 20)
    # produced + rejected drafts; MTP drafts every step of these lines, so it is also
    # (Δdrafts + Δdraft_tokens) / Δt, the old formula: (50 + 60 + 350 + 420) / 20
    assert view.full_acceptance_tokens_per_s == pytest.approx((170 + 210 + 350 + 420 - 120 - 150) / 20)
    assert view.full_acceptance_tokens_per_s == pytest.approx((50 + 60 + 350 + 420) / 20)
    assert view.source == "log"


def test_data_parallel_engines_add_up() -> None:
    f = figures_from("vllm_v1_dp2.log")
    # both engines' lines are 5 s apart: the learnt interval is 5 s, not the 10 s default
    # (the first pair precedes any gap, so it is counted at the default)
    first = (340.5 + 320.5) * 10.0
    rest = (300.0 + 280.0) * 5.0 * 2
    assert f.counters["generation_tokens"] == pytest.approx(first + rest)
    engine = f.engine("vllm")
    assert engine["requests_running"] == 11 + 9
    assert engine["requests_waiting"] == 2 + 4
    assert engine["kv_cache_usage"] == pytest.approx((0.44 + 0.33) / 2)


def test_stated_interval_wins_over_learnt() -> None:
    f = figures_from("vllm_v1_dp2.log", interval_s=2.0)
    assert f.counters["generation_tokens"] == pytest.approx((340.5 + 320.5 + 2 * (300 + 280)) * 2.0)


def test_v0_cumulative_speculative_counts_are_counters() -> None:
    f = figures_from("vllm_v0_spec.log")
    assert f.counters["accepted_tokens"] == 18625  # the latest total, not a sum of totals
    assert f.counters["draft_tokens"] == 28610
    assert f.counters["drafts"] == 28610 / 5
    engine = f.engine("vllm")
    assert engine["requests_waiting"] == 1  # V0 says "Pending"
    assert engine["kv_cache_usage"] == pytest.approx(0.06)  # the GPU figure, not the CPU one


def test_early_v1_without_positions_still_counts_tokens() -> None:
    f = figures_from("vllm_v1_early_spec.log")
    assert f.counters["accepted_tokens"] == 1235 + 1260
    assert f.counters["draft_tokens"] == 1785 + 1800
    # the first line has neither length nor positions: drafts only from the second
    assert f.counters["drafts"] == 1800 / 3
    assert f.lines_skipped == 0


def test_shortest_spec_line_is_scaled_by_generated_tokens() -> None:
    f = figures_from("vllm_short_spec.log")
    gen = (30.0 + 25.0) * 10
    drafts = gen / 2.5
    assert f.counters["generation_tokens"] == pytest.approx(gen)
    assert f.counters["drafts"] == pytest.approx(drafts)
    assert f.counters["accepted_tokens"] == pytest.approx(drafts * 1.5)
    assert f.counters["draft_tokens"] == pytest.approx(drafts * 2)
    assert any("approximate" in n for n in f.notes)
    assert f.engine("vllm").get("kv_cache_usage") is None  # never printed: unknown, not 0


def test_hostile_and_malformed_lines_are_counted_and_skipped() -> None:
    f = figures_from("hostile.log")
    assert f.lines_parsed == 1  # the ANSI-coloured line parses once the escapes are gone
    assert f.lines_skipped == 9
    assert f.counters == {"prompt_tokens": 10.0, "generation_tokens": 20.0, "log_stats_seconds": 10.0}


def test_no_spec_lines_means_unknown_acceptance_not_zero() -> None:
    f = figures_from("vllm_v1_dp2.log")
    engine = f.engine("vllm")
    assert "accepted_tokens_total" not in engine
    assert "drafts_total" not in engine


# ---------------------------------------------------------------------------- user patterns


def test_user_pattern_kinds() -> None:
    parser = PatternParser(
        "mine",
        [
            {"regex": r"step=(?P<steps>\d+)", "kind": "counter"},
            {"regex": r"tokens this batch: (\d+)", "field": "generation_tokens", "kind": "count"},
            {"regex": r"prefill (?P<value>[\d.]+) tok/s", "field": "prompt_tokens", "kind": "rate"},
            {"regex": r"queue=(?P<requests_waiting>\d+) kv=(?P<kv_cache_usage>[\d.]+)%", "kind": "gauge"},
        ],
    )
    f = LogFigures([parser])
    f.feed("step=100 tokens this batch: 64", 0.0)
    f.feed("step=180 tokens this batch: 32 queue=4 kv=37.5%", 5.0)
    f.feed("prefill 200 tok/s", 10.0)  # first sight of a rate: one default interval
    f.feed("prefill 100 tok/s", 14.0)  # then the gap since the previous match
    assert f.counters["steps"] == 180
    assert f.counters["generation_tokens"] == 96
    assert f.counters["prompt_tokens"] == pytest.approx(200 * 10.0 + 100 * 4.0)
    engine = f.engine("mine")
    assert engine["requests_waiting"] == 4
    assert engine["kv_cache_usage"] == pytest.approx(0.375)


def test_user_pattern_bad_number_is_skipped() -> None:
    parser = PatternParser("mine", [{"regex": r"n=(?P<value>\S+)", "field": "steps", "kind": "count"}])
    f = LogFigures([parser])
    f.feed("n=12", 0.0)
    f.feed("n=twelve", 1.0)
    f.feed("n=-3", 2.0)
    assert f.counters["steps"] == 12
    assert f.lines_skipped == 2


def test_user_pattern_config_errors() -> None:
    with pytest.raises(ValueError, match="kind"):
        PatternParser("x", [{"regex": "a", "field": "steps", "kind": "sometimes"}])
    with pytest.raises(ValueError, match="canonical"):
        PatternParser("x", [{"regex": "a", "field": "bogus"}])


def test_deepinfer_offline_set_derives_drafts_from_mean_length() -> None:
    watch = LogWatch(
        {"path": str(FIXTURES / "deepinfer_offline.log"), "pattern_sets": ["deepinfer-offline"], "from_start": True}
    )
    engine, notes = watch.read(now=50.0)
    watch.close()
    assert notes == []
    assert engine["generation_tokens_total"] == 4096 + 4100 + 4050
    assert engine["accepted_tokens_total"] == 2890 + 2902 + 2850
    assert engine["draft_tokens_total"] == 3584 + 3590 + 3550
    assert engine["drafts_total"] == pytest.approx(2890 / 2.35 + 2902 / 2.36 + 2850 / 2.34)
    assert engine["profile"] == "deepinfer-offline"
    assert engine["log_last_line_at"] == 50.0


def test_two_sets_at_once() -> None:
    user = {"extra": [{"regex": r"finished=(?P<requests_finished>\d+)", "kind": "counter"}]}
    watch = LogWatch({"path": "/nonexistent/x.log", "pattern_sets": ["vllm", "extra"], "user_patterns": user})
    f = watch.figures
    f.feed("INFO 01-01 00:00:00 Engine 000: Avg generation throughput: 1.0 tokens/s finished=7", 1.0)
    assert f.counters == {"generation_tokens": 10.0, "requests_finished": 7.0, "log_stats_seconds": 10.0}
    engine, notes = watch.read(now=2.0)
    assert engine["profile"] == "vllm+extra"
    assert notes == ["engine log /nonexistent/x.log: not found"]


# ---------------------------------------------------------------------------- garbage


_FRAGMENTS = [
    "Engine 000: ", "Avg prompt throughput: ", "Avg generation throughput: ", " tokens/s, ",
    "Running: ", "Waiting: ", " reqs, ", "GPU KV cache usage: ", "%", "SpecDecoding metrics: ",
    "Speculative metrics: ", "Mean acceptance length: ", "Accepted: ", "Drafted: ", " tokens, ",
    "Per-position acceptance rate: ", ", ", "Number of accepted tokens: ", "Number of draft tokens: ",
    "Number of speculative tokens: ", "08-04 20:51:08 ", "nan", "inf", "-", "1e308", "\x1b[31m", "[bold]",
]
_numbers = st.one_of(st.integers(-10**30, 10**30).map(str), st.floats(allow_nan=True).map(repr))
_line = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), _numbers, st.text(max_size=8)), max_size=30).map("".join)
_user = PatternParser(
    "u",
    [
        {"regex": r"(?P<accepted_tokens>\S+) (?P<mean_acceptance_length>\S+)", "kind": "count"},
        {"regex": r"acc (?P<draft_acceptance>\S+)", "kind": "gauge"},
        {"regex": r"r (?P<value>\S+)", "field": "prompt_tokens", "kind": "rate"},
        {"regex": r"kv (?P<kv_cache_usage>\S+)", "kind": "gauge"},
    ],
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(_line, st.text(max_size=200)), max_size=20))
def test_garbage_never_raises(lines: list[str]) -> None:
    figures = LogFigures([VllmParser(), _user])
    for i, line in enumerate(lines):
        figures.feed(line, float(i))
    engine = figures.engine("vllm+u")
    EngineSample(**engine)  # whatever came through is a valid sample
    assert figures.lines_parsed + figures.lines_skipped <= len(lines)
