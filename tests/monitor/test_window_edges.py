"""The engine view says which readings bound its window's figures (issue 33): the first
and last engine readings, and for a log the span of its own lines they cover; in the JSON
as ISO 8601 UTC like every time."""

from __future__ import annotations

from datetime import datetime

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.figures import engine_view
from infertop.monitor.monitor import Monitor

LAYOUT = """
[cluster]
name = "edges"
interval_s = 1.0

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 8
"""


def sample(at: float, tokens: float, line_at: float | None = None, source: str = "endpoint") -> NodeSample:
    return NodeSample(node="decode-01", source="test", taken_at=at, engine=EngineSample(
        source=source, generation_tokens_total=tokens, log_stats_line_at=line_at))


def test_an_endpoints_window_is_bounded_by_its_first_and_last_readings() -> None:
    samples = [sample(100.0, 0.0), sample(102.0, 50.0), sample(104.5, 120.0)]
    view = engine_view(samples, 105.0)
    assert view is not None
    assert (view.window_first_reading_at, view.window_last_reading_at) == (100.0, 104.5)
    # the rate is over exactly that span
    assert view.accepted_tokens_per_s == 120.0 / 4.5
    assert view.log_window_start_at is None and view.log_window_end_at is None


def test_one_reading_bounds_nothing() -> None:
    view = engine_view([sample(100.0, 0.0, 99.0)], 101.0)
    assert view is not None
    assert view.window_first_reading_at is None and view.window_last_reading_at is None
    assert view.log_window_start_at is None and view.log_window_end_at is None


def test_a_logs_window_spans_the_stamps_of_its_newest_lines() -> None:
    # the first reading saw no throughput line yet: the log's span starts at the second
    samples = [sample(100.0, 0.0, None, "log"), sample(102.0, 10.0, 101.0, "log"),
               sample(104.0, 30.0, 103.0, "log"), sample(106.0, 50.0, 105.0, "log")]
    view = engine_view(samples, 106.0)
    assert view is not None
    assert (view.window_first_reading_at, view.window_last_reading_at) == (100.0, 106.0)
    assert (view.log_window_start_at, view.log_window_end_at) == (101.0, 105.0)


def test_the_json_writes_the_edges_as_iso_times() -> None:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    for i in range(3):
        monitor.fleet.ingest(sample(995.0 + i, 10.0 * i, 990.0 + i, "log"))
    engine = monitor.tick(998.0).to_json_dict()["nodes"][0]["engine"]
    iso = {k: datetime.fromisoformat(engine[k]).timestamp() for k in (
        "window_first_reading_at", "window_last_reading_at", "log_window_start_at", "log_window_end_at")}
    assert iso == {"window_first_reading_at": 995.0, "window_last_reading_at": 997.0,
                   "log_window_start_at": 990.0, "log_window_end_at": 992.0}
    assert engine["window_first_reading_at"].endswith("+00:00")
