"""A log's own clock: the stamp of its newest throughput line as unix seconds
(collectors/probe/log_parsers.log_stamp_unix, LogFigures.stats_line_at), which the engine
view turns into the span of lines a window's figures cover (issue 33)."""

from __future__ import annotations

from datetime import datetime

from infertop.collectors.probe.log_parsers import SglangParser, VllmParser, log_stamp_unix
from infertop.collectors.probe.logs import LogFigures


def local(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


def test_a_vllm_stamp_is_the_local_time_of_the_year_it_was_read_in() -> None:
    seen = local("2026-12-06 05:12:04")
    line = "INFO 12-06 05:12:03 [loggers.py:123] Engine 000: Avg generation throughput: 2.0 tokens/s"
    assert log_stamp_unix(line, seen) == local("2026-12-06 05:12:03")
    # a line of the year's last second read just after midnight: the year before
    old = "INFO 12-31 23:59:59 [loggers.py:123] Engine 000: Avg generation throughput: 2.0 tokens/s"
    assert log_stamp_unix(old, local("2027-01-01 00:00:01")) == local("2026-12-31 23:59:59")


def test_an_sglang_stamp_carries_its_year_and_fraction() -> None:
    line = "[2026-11-30 10:00:01.250 DP0 TP0 EP0] Decode batch, #running-req: 4, gen throughput (token/s): 9.0"
    assert log_stamp_unix(line, 0.0) == local("2026-11-30 10:00:01") + 0.25


def test_no_stamp_or_an_impossible_one_is_none() -> None:
    assert log_stamp_unix("Avg generation throughput: 2.0 tokens/s", 1e9) is None
    assert log_stamp_unix("INFO 13-45 25:61:61 Avg generation throughput: 2.0", 1e9) is None


def test_only_throughput_lines_move_the_logs_clock() -> None:
    figures = LogFigures([VllmParser()])
    seen = local("2026-12-06 05:12:10")
    assert figures.engine("vllm")["log_stats_line_at"] is None
    figures.feed("INFO 12-06 05:12:03 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
                 "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs", seen)
    figures.feed("INFO 12-06 05:12:04 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 1.50, "
                 "Accepted: 5 tokens, Drafted: 10 tokens, Per-position acceptance rate: 0.500", seen)
    assert figures.engine("vllm")["log_stats_line_at"] == local("2026-12-06 05:12:03")


def test_sglang_lines_move_it_once_they_cover_time() -> None:
    figures = LogFigures([SglangParser()])
    seen = []
    for stamp in ("10:00:01", "10:00:03"):
        figures.feed(f"[2026-11-30 {stamp} DP0 TP0 EP0] Decode batch, #running-req: 4, "
                     "gen throughput (token/s): 9.0, #queue-req: 0", 0.0)
        seen.append(figures.engine("sglang")["log_stats_line_at"])
    # an engine's first line covers no known time: the clock starts at its second
    assert seen[0] is None
    assert figures.engine("sglang")["log_stats_line_at"] == local("2026-11-30 10:00:03")
