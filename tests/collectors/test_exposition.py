"""Exposition parsing and engine profiles, against fixtures in real exposition format."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.collectors.pages.exposition import ExpositionError, clean_label, parse_exposition, redact_url
from infertop.collectors.pages.profiles import (
    BUNDLED_PROFILES,
    ProfileError,
    engine_sample_from_exposition,
    engine_sample_from_text,
    resolve_profile,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "exposition"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_vllm_v1_sums_engines_and_reasons_and_ignores_created_and_per_pos() -> None:
    e = engine_sample_from_text(fixture("vllm_v1.txt"), "vllm")
    assert e.profile == "vllm" and e.source == "endpoint"
    # two DP engines: counters summed
    assert e.generation_tokens_total == 300_000 + 240_000
    assert e.prompt_tokens_total == 180_000
    assert e.prompt_cached_tokens_total == 50_000
    assert e.drafts_total == 360_000
    assert e.draft_tokens_total == 1_080_000
    # the per-position series sum to the same total: had they been matched by
    # substring, this would be doubled
    assert e.accepted_tokens_total == 756_000
    # finished_reason stop + length + abort, over both engines
    assert e.requests_finished_total == 900 + 100 + 700 + 50
    # steps: the engines step in lockstep, so their mean (5000 and 5002)
    assert e.steps_total == 5001
    assert e.requests_running == 64 and e.requests_waiting == 4
    assert e.kv_cache_usage == pytest.approx(0.4)  # mean of 0.5 and 0.3
    assert e.ttft_seconds_count == 1800 and e.ttft_seconds_sum == pytest.approx(850)
    assert e.itl_seconds_count == 538_200


def test_vllm_older_names_are_accepted() -> None:
    e = engine_sample_from_text(fixture("vllm_old.txt"), "vllm")
    assert e.kv_cache_usage == 0.25  # vllm:gpu_cache_usage_perc
    assert e.itl_seconds_count == 11_990  # vllm:time_per_output_token_seconds
    assert e.itl_seconds_sum == pytest.approx(215.82)
    assert e.draft_tokens_total == 3000 and e.accepted_tokens_total == 2100
    # V0 had no draft counter and no iteration histogram: unknown, never 0
    assert e.drafts_total is None and e.steps_total is None


def test_new_name_wins_over_old_when_both_present() -> None:
    text = (
        "vllm:kv_cache_usage_perc 0.7\n"
        "vllm:gpu_cache_usage_perc 0.1\n"
    )
    assert engine_sample_from_text(text, "vllm").kv_cache_usage == 0.7


def test_sglang_profile() -> None:
    e = engine_sample_from_text(fixture("sglang.txt"), "sglang")
    assert e.requests_running == 56 and e.requests_waiting == 4
    assert e.kv_cache_usage == pytest.approx(0.6)
    # live decode tokens (realtime_tokens_total{mode="decode"}), not the finish-time counter
    assert e.generation_tokens_total == 1_200_000
    assert e.prompt_cached_tokens_total == 400_000
    assert e.requests_finished_total == 2500
    # one DP engine reporting decode passes split by CUDA-graph mode: summed within the
    # engine; its prefill passes are not decode steps
    assert e.steps_total == 10_000
    # SGLang has no speculative-decoding counters (gauges only): unknown; its gauges
    # count only with verify calls (none on this page)
    assert e.drafts_total is None and e.accepted_tokens_total is None
    assert e.spec_accept_length is None
    assert e.itl_seconds_count == 1_232_067


def test_deepinfer_reads_vllm_names() -> None:
    a = engine_sample_from_text(fixture("vllm_v1.txt"), "deepinfer")
    b = engine_sample_from_text(fixture("vllm_v1.txt"), "vllm")
    assert a.profile == "deepinfer"
    # each rank's engine names its profile too (issue 35)
    without = {"profile": True, "ranks": {"__all__": {"engine": {"profile"}}}}
    assert a.model_dump(exclude=without) == b.model_dump(exclude=without)
    assert a.ranks is not None and {r.engine.profile for r in a.ranks} == {"deepinfer"}


def test_custom_profile_maps_fields_and_extends() -> None:
    text = (
        "# TYPE my_steps_total counter\nmy_steps_total 77\n"
        "# TYPE my_gen_total counter\nmy_gen_total 1000\n"
        "my_queue 3\n"
        "# TYPE my_ttft histogram\nmy_ttft_bucket{le=\"+Inf\"} 4\nmy_ttft_count 4\nmy_ttft_sum 2\n"
        "vllm:num_requests_running 9\n"
    )
    custom = {
        "mine": {
            "extends": "vllm",
            "steps": "my_steps_total",
            "generation_tokens_total": ["missing_total", "my_gen_total"],
            "requests_waiting": "my_queue",
            "ttft_seconds": "my_ttft",
        }
    }
    e = engine_sample_from_text(text, "mine", custom)
    assert e.profile == "mine"
    assert e.steps_total == 77
    assert e.generation_tokens_total == 1000  # second candidate, first absent
    assert e.requests_waiting == 3
    assert e.requests_running == 9  # inherited from vllm
    assert e.ttft_seconds_count == 4 and e.ttft_seconds_sum == 2


@pytest.mark.parametrize(
    ("mapping", "field"),
    [
        ({"stepz": "x"}, "p.stepz"),
        ({"extends": "tgi"}, "p.extends"),
        ({"steps": []}, "p.steps"),
        ({"steps": "has space"}, "p.steps"),
        ({"ttft_seconds_sum": "foo_total"}, "p.ttft_seconds_sum"),
    ],
)
def test_bad_custom_profile_names_the_key(mapping: dict[str, str | list[str]], field: str) -> None:
    with pytest.raises(ProfileError) as err:
        resolve_profile("p", {"p": mapping})
    assert err.value.field == field


def test_unknown_profile() -> None:
    with pytest.raises(ProfileError, match="unknown engine profile"):
        resolve_profile("tgi")


def test_page_without_engine_metrics_is_an_error_not_blanks() -> None:
    with pytest.raises(ExpositionError, match="no vllm engine metrics"):
        engine_sample_from_text(fixture("sglang.txt"), "vllm", where="http://n1:8000/metrics")


def test_created_series_alone_is_not_a_counter() -> None:
    # only the _created timestamp: must not be read as prompt tokens
    text = "# TYPE vllm:prompt_tokens_created gauge\nvllm:prompt_tokens_created 1.7e9\nvllm:num_requests_running 1\n"
    assert engine_sample_from_text(text, "vllm").prompt_tokens_total is None


def test_nan_is_unknown() -> None:
    e = engine_sample_from_text("vllm:kv_cache_usage_perc NaN\nvllm:num_requests_running 2\n", "vllm")
    assert e.kv_cache_usage is None and e.requests_running == 2


@pytest.mark.parametrize(
    "text",
    ["this is not metrics", 'x{a="b} 1', "a{", "{} 1", "\x00\x01\x02", "<html><body>502</body></html>"],
)
def test_garbage_is_an_exposition_error_without_the_text(text: str) -> None:
    where = "http://user:s3cret@n1:8000/metrics"
    with pytest.raises(ExpositionError) as err:
        parse_exposition(text, where)
    message = str(err.value)
    assert message.startswith("bad exposition from http://***@n1:8000/metrics")
    assert "s3cret" not in message and text not in message
    assert len(message) < 200
    # filtered to the profile's names, a malformed line of no interest may be skipped
    # unread, but a page with nothing usable is still an error, and still quotes nothing
    with pytest.raises(ExpositionError) as err:
        engine_sample_from_text(text, "vllm", where=where)
    message = str(err.value)
    assert "s3cret" not in message and text not in message


@pytest.mark.parametrize(
    "text",
    ["vllm:num_requests_running 1\nthis is not metrics\n", "vllm:num_requests_running 1\n<html>\n"],
)
def test_prose_among_samples_is_garbage_even_when_skipped(text: str) -> None:
    with pytest.raises(ExpositionError, match="bad exposition"):
        engine_sample_from_text(text, "vllm")


def test_wanted_filter_keeps_exact_names_only() -> None:
    text = fixture("vllm_v1.txt")
    wanted = frozenset({"vllm:prompt_tokens_total", "vllm:iteration_tokens_total_count"})
    idx = parse_exposition(text, wanted=wanted)
    assert set(idx.samples) == set(wanted)
    # filtering changes nothing the profile reads
    vllm = BUNDLED_PROFILES["vllm"]
    unfiltered = engine_sample_from_exposition(parse_exposition(text), vllm)
    assert engine_sample_from_text(text, "vllm") == unfiltered


def test_every_bundled_profile_lists_exact_names() -> None:
    for profile in BUNDLED_PROFILES.values():
        for name in profile.metric_names():
            assert not name.endswith("_created")


def test_redact_and_clean_label() -> None:
    assert redact_url("http://a:b@h:1/m") == "http://***@h:1/m"
    assert redact_url("http://h/m") == "http://h/m"
    assert clean_label("H200\x1b[31m") == "H200\\x1b[31m"  # shown, never obeyed
    assert clean_label("[bold]x[/]") == "[bold]x[/]"
    assert len(clean_label("x" * 10_000) or "") == 200


def test_parse_index_is_by_exact_sample_name() -> None:
    idx = parse_exposition(fixture("vllm_v1.txt"))
    assert "vllm:prompt_tokens_total" in idx
    assert "vllm:prompt_tokens" not in idx.samples  # the family name prometheus_client reports
    assert "vllm:iteration_tokens_total_count" in idx
    assert idx.series("vllm:prompt_tokens_created") and not idx.series("vllm:prompt_tokens_total_created")


def test_counter_exposed_without_total_suffix_is_found_by_its_own_name() -> None:
    # prometheus_client renames such samples to <name>_total; the exporter's name must work
    idx = parse_exposition("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
                           'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"} 5000\n')
    assert idx.series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == [({"gpu": "0"}, 5000.0)]
    # an explicit sample of that name wins over the fallback
    idx = parse_exposition("# TYPE x counter\nx_total 1\n# TYPE x gauge\nx 7\n")
    assert idx.series("x") == [({}, 7.0)]
