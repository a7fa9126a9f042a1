"""The session record written by a background thread (the TUI's mode): same rows, same totals."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.recording import Recording
from infertop.monitor.record.store import Recorder, add_phase_mark

LAYOUT = """
[cluster]
name = "store-bg"
interval_s = 0.2
[pricing]
gpu_hour_usd = 36.0
[[nodes]]
name = "d1"
role = "decode"
gpus = 2
"""


def _recorded(tmp_path: Path) -> tuple[Monitor, Recorder]:
    layout = parse_layout(LAYOUT, str(tmp_path / "layout.toml"))
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", background=True, now=1000.0)
    return Monitor(layout, sources=[], clock=lambda: 1000.0, recorder=recorder), recorder


def _tick(monitor: Monitor, step: int):  # type: ignore[no-untyped-def]
    monitor.fleet.ingest(NodeSample(node="d1", source="scrape", taken_at=1000.0 + step,
                                   engine=EngineSample(generation_tokens_total=100.0 * step)))
    return monitor.tick(1000.0 + step)


def test_background_writes_every_tick_in_order_and_close_drains(tmp_path: Path) -> None:
    monitor, recorder = _recorded(tmp_path)
    writer = recorder._writer
    assert writer is not None and writer is not threading.current_thread()
    _tick(monitor, 1)
    add_phase_mark(recorder.path, "load", 1001.5)
    last = [_tick(monitor, step) for step in range(2, 8)][-1]
    recorder.close()
    assert not writer.is_alive()
    rec = Recording.load(recorder.path)
    try:
        assert rec.problems == []
        assert [t.at for t in rec.ticks] == [1000.0 + s for s in range(1, 8)]
        assert rec.final_session() == last.session  # report totals = live totals
        assert rec.snapshot(rec.ticks[-1].id) == last
        assert rec.ticks[-1].phase == "load"
    finally:
        rec.close()
    marks = sqlite3.connect(recorder.path).execute("SELECT phase, applied FROM phase_marks").fetchall()
    assert marks == [("load", 1)]


def test_a_slow_writer_holds_the_next_tick_so_at_most_one_is_in_flight(tmp_path: Path) -> None:
    monitor, recorder = _recorded(tmp_path)
    add_phase_mark(recorder.path, "load", 1002.5)
    blocker = sqlite3.connect(recorder.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the writer waits on this lock (busy timeout 5 s)
    _tick(monitor, 1)  # handed over; its commit waits on the lock
    second = threading.Thread(target=_tick, args=(monitor, 2))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # tick 2 waits for tick 1: a kill now would lose only tick 1
    blocker.execute("COMMIT")
    blocker.close()
    second.join(10)
    assert not second.is_alive()
    snaps = [_tick(monitor, step) for step in range(3, 6)]
    recorder.close()
    rec = Recording.load(recorder.path)
    try:
        assert rec.problems == []
        assert [t.at for t in rec.ticks] == [1000.0 + s for s in range(1, 6)]  # none dropped
        assert rec.final_session() == snaps[-1].session
        assert rec.ticks[-1].phase == "load"
    finally:
        rec.close()
    marks = sqlite3.connect(recorder.path).execute("SELECT phase, applied FROM phase_marks").fetchall()
    assert marks == [("load", 1)]
