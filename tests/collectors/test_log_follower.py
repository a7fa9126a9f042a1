"""The log follower on real files: start at the end, rotation, truncation, partial lines."""

from __future__ import annotations

import itertools
import os
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.collectors.probe.log_follower import LogFollower
from infertop.collectors.probe.logs import LogWatch
from tests.support.waiting import until

STATS = (
    "(APIServer pid=1) INFO 08-04 20:51:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: {g:.1f} tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
    "Prefix cache hit rate: 0.0%"
)


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def test_starts_at_the_end_and_reads_only_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("old 1\nold 2\n")
    follower = LogFollower(str(log))
    lines, backlog = follower.poll()
    assert lines == []
    assert backlog == ["old 1", "old 2"]  # seen once, for gauges; never as new lines
    append(log, "new 1\nnew 2\n")
    assert follower.poll() == (["new 1", "new 2"], [])
    assert follower.poll() == ([], [])
    follower.close()


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("")
    follower = LogFollower(str(log))
    follower.poll()
    append(log, "Engine 000: Avg prompt")
    assert follower.poll() == ([], [])
    append(log, " throughput: 1.0 tokens/s\nnext")
    assert follower.poll() == (["Engine 000: Avg prompt throughput: 1.0 tokens/s"], [])
    append(log, "\n")
    assert follower.poll() == (["next"], [])
    follower.close()


def test_a_partial_line_at_join_is_not_lost(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("done\nhalf of a li")
    follower = LogFollower(str(log))
    assert follower.poll() == ([], ["done"])
    append(log, "ne\n")
    assert follower.poll() == (["half of a line"], [])
    follower.close()


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("before\n")
    follower = LogFollower(str(log))
    follower.poll()
    # logrotate's default: rename, the writer still holds the old file for a moment
    writer = log.open("a", encoding="utf-8")
    os.rename(log, tmp_path / "engine.log.1")
    writer.write("last words of the old file\nunterminated")
    writer.close()
    log.write_text("first of the new file\n")
    lines, _ = follower.poll()
    assert lines == ["last words of the old file", "unterminated", "first of the new file"]
    assert follower.rotations == 1
    append(log, "second\n")
    assert follower.poll() == (["second"], [])
    follower.close()


def test_missing_file_then_created_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    follower = LogFollower(str(log))
    assert follower.poll() == ([], [])
    assert follower.error == "not found"
    log.write_text("a\nb\n")
    assert follower.poll() == (["a", "b"], [])  # created after we started: all of it is new
    assert follower.error is None
    follower.close()


def test_truncation_starts_again_at_zero(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("x" * 100 + "\n")
    follower = LogFollower(str(log))
    follower.poll()
    with log.open("r+") as f:  # copytruncate
        f.truncate(0)
    append(log, "after truncate\n")
    assert follower.poll() == (["after truncate"], [])
    assert follower.truncations == 1
    follower.close()


def test_overlong_line_is_dropped_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("")
    follower = LogFollower(str(log), max_line_bytes=1000)
    follower.poll()
    append(log, "y" * 600)
    assert follower.poll() == ([], [])
    append(log, "y" * 600)  # now past the limit, still no newline
    assert follower.poll() == ([], [])
    append(log, "y" * 50 + "\nfine\n")
    assert follower.poll() == (["fine"], [])
    assert follower.overlong_lines == 1
    follower.close()


def test_burst_is_read_over_several_polls(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("")
    follower = LogFollower(str(log), max_read_bytes=64)
    follower.poll()
    append(log, "".join(f"line {i:03d}\n" for i in range(40)))  # 360 bytes
    got: list[str] = []
    for _ in range(10):
        got.extend(follower.poll()[0])
    assert got == [f"line {i:03d}" for i in range(40)]
    follower.close()


def test_unreadable_file_is_a_note_not_an_error(tmp_path: Path) -> None:
    log = tmp_path / "dir.log"
    log.mkdir()  # a directory where a file was expected
    watch = LogWatch({"path": str(log)})
    engine, notes = watch.read(now=1.0)
    assert engine["source"] == "log"
    assert engine["log_last_line_at"] is None
    assert len(notes) == 1 and "dir.log" in notes[0]
    watch.close()


def test_watch_end_to_end_on_a_growing_file(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(STATS.format(s=0, g=5.0) + "\n")  # before we joined: a baseline only
    os.utime(log, (900.0, 900.0))
    watch = LogWatch({"path": str(log)})
    engine, _ = watch.read(now=1000.0)
    assert engine["log_last_line_at"] == 900.0  # the file's mtime, not "now"
    base = engine["generation_tokens_total"]
    append(log, STATS.format(s=10, g=20.0) + "\nunrelated line\n")
    engine, _ = watch.read(now=1010.0)
    assert engine["generation_tokens_total"] - base == 200.0
    assert engine["log_last_line_at"] == 1010.0
    assert engine["log_lines_skipped_total"] == 0
    watch.close()


@settings(max_examples=60, deadline=None)
@given(
    text=st.binary(max_size=3000),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=8),
)
def test_any_chunking_yields_the_same_lines(tmp_path_factory, text: bytes, cuts: list[int]) -> None:
    """However the writer splits its writes, the lines read are the lines written."""
    log = tmp_path_factory.mktemp("chunks") / "engine.log"
    log.write_bytes(b"")
    follower = LogFollower(str(log), max_line_bytes=10_000)
    follower.poll()
    got: list[str] = []
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    for a, b in itertools.pairwise(points):
        with log.open("ab") as f:
            f.write(text[a:b])
        got.extend(follower.poll()[0])
    follower.close()
    complete = text[: text.rfind(b"\n") + 1] if b"\n" in text else b""
    expected = [p.decode("utf-8", "replace").rstrip("\r") for p in complete.split(b"\n")[:-1]]
    assert got == expected


# ---------------------------------------------------------------------------- a command's output

EMITTER = (
    "import sys, time\n"
    "for i in range(int(sys.argv[1])):\n"
    "    sys.stdout.write(sys.argv[2].format(s=i)); sys.stdout.flush(); time.sleep(0.05)\n"
)


def _poll_until(watch: LogWatch, condition, timeout_s: float = 20.0) -> tuple[dict, list[str]]:
    """Read the watch until one reading meets `condition`; that reading."""
    readings: list[tuple[dict, list[str]]] = []

    def met() -> bool:
        readings.append(watch.read())
        return bool(condition(*readings[-1]))

    until(met, timeout_s, "the log reading", detail=lambda: readings[-1:])
    return readings[-1]


def test_command_output_is_followed_like_a_file() -> None:
    watch = LogWatch({"command": [sys.executable, "-c", EMITTER, "3", STATS.replace("{g:.1f}", "20.0") + "\n"]})
    engine, notes = _poll_until(watch, lambda e, n: any("exited" in x for x in n))
    watch.close()
    # the first line counts one default interval (10 s); then the stamps say 1 s apart
    assert engine["generation_tokens_total"] == 20.0 * 10 + 20.0 * 1 + 20.0 * 1
    assert engine["requests_running"] == 1
    assert any("command exited with status 0" in n for n in notes)


def test_missing_command_is_a_note() -> None:
    watch = LogWatch({"command": ["/nonexistent/journalctl", "-f"]})
    engine, notes = watch.read()
    watch.close()
    assert engine["source"] == "log"
    assert notes and "cannot run" in notes[0]


def test_command_is_killed_on_close() -> None:
    watch = LogWatch({"command": [sys.executable, "-c", "import time; time.sleep(60)"]})
    watch.read()
    proc = watch.follower._proc  # type: ignore[attr-defined]
    assert proc is not None and proc.poll() is None
    watch.close()
    assert proc.poll() is not None


# ---------------------------------------------------------------------------- hostile logs


@pytest.mark.hostile
def test_a_100_mb_line_is_skipped_in_one_poll(tmp_path: Path) -> None:
    """An over-long line is stepped over cheaply (read, never kept), not 4 MB per poll."""
    log = tmp_path / "engine.log"
    log.write_text("")
    watch = LogWatch({"path": str(log)})
    watch.read(now=1000.0)
    with log.open("ab") as f:
        for _ in range(100):
            f.write(b"x" * 1_000_000)
        f.write(b"\n" + STATS.format(s=0, g=5.0).encode() + b"\n")
    tracemalloc.start()
    try:
        engine, _ = watch.read(now=1001.0)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # stepped over in chunks, never held: a copy of the line would be 100 MB
    assert peak_bytes < 16_000_000, peak_bytes
    assert engine["requests_running"] == 1  # the stats line after it was read this poll
    assert engine["log_lines_skipped_total"] == 1  # the 100 MB line, counted once
    assert engine["log_last_line_at"] == 1001.0
    watch.close()


@pytest.mark.hostile
def test_a_log_growing_faster_than_it_is_read_says_how_far_behind(tmp_path: Path) -> None:
    """Behind the end of the file, lines read now are not fresh: the note gives the lag in
    bytes and the newest line's time stays at when the file was seen holding it."""
    log = tmp_path / "engine.log"
    log.write_text("")
    watch = LogWatch({"path": str(log)})
    watch.read(now=1000.0)
    burst = "".join(STATS.format(s=i % 60, g=5.0) + "\n" for i in range(60_000)).encode()  # ~19 MB
    with log.open("ab") as f:
        f.write(burst)
    _, notes = watch.read(now=1001.0)
    behind = [n for n in notes if "behind the end of the file" in n]
    assert behind and f"{(len(burst) - 4 * 1024 * 1024) / 1e6:.1f} MB behind" in behind[0]
    with log.open("ab") as f:
        f.write(burst)  # it keeps growing: we fall further behind
    engine, notes = watch.read(now=1002.0)
    # read at 1002, written by 1001 at the latest: its age shows, it is not "just now"
    assert engine["log_last_line_at"] == 1001.0
    assert any(f"{(2 * len(burst) - 8 * 1024 * 1024) / 1e6:.1f} MB behind" in n for n in notes)
    for _ in range(20):  # no more growth: it catches up and the note goes
        engine, notes = watch.read(now=1003.0)
    assert not any("behind" in n for n in notes)
    watch.close()
