"""Histogram bucket lines read on the fast path give the bounds and counts
prometheus_client's parser gives (duplicates dropped, odd shapes left to the parser)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from collectors.exposition import ExpositionError, parse_exposition
from collectors.fast_buckets import parse_bucket_line

NAME = "vllm:inter_token_latency_seconds"
WANTED = frozenset({f"{NAME}_bucket", f"{NAME}_count", f"{NAME}_sum"})


def page(model: str, observations: list[float]) -> str:
    reg = CollectorRegistry()
    h = Histogram(NAME, "ITL", ["model_name", "engine"], buckets=[0.01, 0.025, 0.05], registry=reg)
    for i, v in enumerate(observations):
        h.labels(model, str(i % 2)).observe(v)
    return generate_latest(reg).decode()


def buckets_of(text: str, wanted: frozenset[str] | None) -> list[tuple[float, float]]:
    """(bound, count) of every bucket series: what collectors/histograms.py sums."""
    return sorted((float(labels["le"]), value)
                  for labels, value in parse_exposition(text, "t", wanted).series(f"{NAME}_bucket"))


@settings(max_examples=60, deadline=None)
# any label text but NUL (a page with NUL is refused as binary on either path)
@given(st.text(st.characters(blacklist_characters="\x00"), max_size=30), st.lists(st.floats(0, 1), min_size=2, max_size=20))
def test_same_as_the_full_parser(model: str, observations: list[float]) -> None:
    text = page(model, observations)
    fast = buckets_of(text, WANTED)  # wanted: the fast path
    full = buckets_of(text, None)  # no filter: every line through prometheus_client
    assert fast == full and len(fast) == 8


def test_shapes_it_reads_and_those_it_leaves() -> None:
    assert parse_bucket_line('x_bucket{a="1",le="0.5"} 3') == ("x_bucket", {"le": "0.5"}, 3.0, 'a="1",le="0.5"')
    assert parse_bucket_line('x_bucket{le="+Inf",a="q\\"}\\\\\\n"} 7 1700000000000')[:3] == (
        "x_bucket", {"le": "+Inf"}, 7.0)
    # `le="…"` inside another label's value is no bound: left to the full parser
    assert parse_bucket_line('x_bucket{a="b,le=",c="1"} 3') is None
    assert parse_bucket_line('x_bucket{a="1"} 3') is None  # no le: not for the fast path
    assert parse_bucket_line('x_bucket{le="1"} NaN') is None  # non-finite: left to the parser
    assert parse_bucket_line('x_bucket{le="1" 3') is None
    assert parse_bucket_line("x_bucket 3") is None


def test_a_duplicate_bucket_series_keeps_the_first_value() -> None:
    text = (f'{NAME}_bucket{{le="0.05"}} 5\n{NAME}_bucket{{le="0.05"}} 9\n'
            f'{NAME}_bucket{{le="+Inf"}} 9\n')
    index = parse_exposition(text, "t", WANTED)
    assert [v for _, v in index.series(f"{NAME}_bucket")] == [5.0, 9.0]
    assert index.duplicates == {f"{NAME}_bucket": 1}
    assert math.isinf(float(index.series(f"{NAME}_bucket")[1][0]["le"]))


def test_garbage_bucket_lines_are_still_garbage() -> None:
    with pytest.raises(ExpositionError):
        parse_exposition(f'{NAME}_bucket{{le="0.05"}} five\n', "t", WANTED)
