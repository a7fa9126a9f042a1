"""The node screen's engine block says which readings its figures are over (issue 33)."""

from __future__ import annotations

from datetime import datetime

from infertop.monitor.format import UNKNOWN
from infertop.monitor.snapshot import EngineView
from infertop.tui.node_rows import engine_text, window_span


def at(hms: str) -> float:
    return datetime.fromisoformat(f"2026-12-06T{hms}+00:00").timestamp()


def test_the_header_names_the_windows_readings_and_a_logs_lines() -> None:
    scraped = EngineView(source="endpoint", profile="vllm", age_s=1.0,
                         window_first_reading_at=at("05:12:03"), window_last_reading_at=at("05:12:13"))
    text = engine_text(scraped, []).plain
    assert "over readings 05:12:03–05:12:13 UTC" in text.splitlines()[0]
    logged = scraped.model_copy(update={"source": "log", "log_window_start_at": at("05:12:02"),
                                        "log_window_end_at": at("05:12:12")})
    assert "(log lines after 05:12:02 to 05:12:12)" in window_span(logged)


def test_unknown_edges_add_nothing_and_a_hostile_time_is_unknown() -> None:
    assert window_span(EngineView(window_first_reading_at=at("05:12:03"))) == ""
    hostile = EngineView(window_first_reading_at=1e300, window_last_reading_at=at("05:12:13"))
    assert window_span(hostile) == f", over readings {UNKNOWN}–05:12:13 UTC"
