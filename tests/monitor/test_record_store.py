"""The session record: written per tick, resumed after a crash, read back tolerantly."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from infertop.cli.main import main
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.layouts import load_layout, parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.codec import RecordError
from infertop.monitor.record.recording import Recording
from infertop.monitor.record.store import Recorder, add_phase_mark, default_record_path
from infertop.monitor.state import state_dir

LAYOUT = """
[cluster]
name = "store-test"
interval_s = 0.2
[session]
budget_usd = 100
[pricing]
gpu_hour_usd = 36.0
extras_hour_usd = 3.6
[[nodes]]
name = "d1"
role = "decode"
gpus = 2
[[nodes]]
name = "p1"
role = "prefill"
gpus = 1
"""
RATE = 3 * 36.0 + 3.6
INFERTOP = str(Path(__file__).resolve().parent.parent.parent / ".venv" / "bin" / "infertop")


def infertop_bin() -> str:
    return INFERTOP if Path(INFERTOP).exists() else "infertop"


def write_layout(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "layout.toml"
    path.write_text(LAYOUT.replace("[pricing]", extra + "[pricing]") if extra else LAYOUT)
    return path


def recorded_at(layout_path: Path, t0: float) -> tuple[Monitor, Recorder]:
    """A monitor whose clock reads `t0`, with its session record (the default path)."""
    layout = load_layout(layout_path)
    recorder = Recorder.open(layout, now=t0)
    return Monitor(layout, sources=[], clock=lambda: t0, recorder=recorder), recorder


def test_state_dir_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert state_dir() == Path(os.environ["INFERTOP_STATE_DIR"])  # the autouse fixture's
    monkeypatch.delenv("INFERTOP_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_dir() == tmp_path / "infertop"
    layout = parse_layout(LAYOUT, str(tmp_path / "x.toml"))
    assert default_record_path(layout).parent == tmp_path / "infertop"
    assert default_record_path(layout).name.startswith("store-test-")


def test_ticks_written_and_read_back(tmp_path: Path) -> None:
    monitor, recorder = recorded_at(write_layout(tmp_path), 1000.0)
    assert monitor.record_path == str(default_record_path(monitor.layout))
    emit = monitor.fleet.ingest  # the path every source's samples take
    last = None
    for step in range(1, 6):
        emit(NodeSample(node="d1", source="scrape", taken_at=1000.0 + step,
                        engine=EngineSample(generation_tokens_total=100.0 * step)))
        last = monitor.tick(1000.0 + step)
    assert last is not None and last.session.record_path == str(recorder.path)
    recorder.close()
    rec = Recording.load(recorder.path)
    try:
        assert rec.problems == []
        assert [t.at for t in rec.ticks] == [1001.0, 1002.0, 1003.0, 1004.0, 1005.0]
        assert rec.layout is not None and rec.layout.cluster.name == "store-test"
        # what the live session last showed is what the record totals say
        assert rec.final_session() == last.session
        assert rec.snapshot(rec.ticks[-1].id) == last
        assert float(rec.ticks[-1].spend_usd or 0) == pytest.approx(RATE * 5 / 3600, abs=1e-12)
        assert rec.ticks[-1].output_tokens == 400.0
    finally:
        rec.close()


def test_crash_resumes_clean_end_starts_anew(tmp_path: Path) -> None:
    layout_path = write_layout(tmp_path)
    monitor, recorder = recorded_at(layout_path, 0.0)
    for step in (10.0, 20.0):
        monitor.tick(step)
    recorder.store.conn.close()  # a crash: no end mark, no checkpoint
    assert recorder.store.lock is not None
    recorder.store.lock.release()  # and the kernel drops a dead writer's lock
    again, resumed = recorded_at(layout_path, 50.0)
    assert resumed.store.resumed
    assert again.ledger.started_at == 0.0
    snap = again.tick(50.0)
    # the ledger continued: the 30 s gap was billed (unwatched), nothing charged twice
    assert snap.session.spend_usd == pytest.approx(RATE * 50 / 3600, abs=1e-12)
    assert snap.session.unwatched_s == pytest.approx(10.0 + 30.0)  # before the first tick + gap
    resumed.close()
    fresh_monitor, fresh = recorded_at(layout_path, 100.0)
    assert not fresh.store.resumed and fresh_monitor.ledger.started_at == 100.0
    archived = [p for p in fresh.path.parent.glob("store-test-*.sqlite") if p != fresh.path]
    assert len(archived) == 1  # the ended session kept under a dated name
    fresh.close()


def test_pinned_reservation_start_always_resumes(tmp_path: Path) -> None:
    layout_path = write_layout(tmp_path, '[session]\nreservation_start = "1970-01-01T00:00:00Z"\n')
    layout_path.write_text(layout_path.read_text().replace("[session]\nbudget_usd = 100\n", ""))
    monitor, recorder = recorded_at(layout_path, 10.0)
    monitor.tick(10.0)
    recorder.close()
    again, resumed = recorded_at(layout_path, 20.0)
    assert resumed.store.resumed
    assert again.tick(20.0).session.spend_usd == pytest.approx(RATE * 20 / 3600, abs=1e-12)
    resumed.close()


def test_cli_phase_mark_applies_at_next_tick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout_path = write_layout(tmp_path)
    base = time.time() - 1000  # the CLI marks at the wall clock: about base + 1000
    monitor, recorder = recorded_at(layout_path, base)
    monitor.tick(base + 100)
    assert main(["phase", "load", "--layout", str(layout_path)]) == 0
    assert "phase load marked" in capsys.readouterr().out
    add_phase_mark(recorder.path, "warmup", base + 1500)
    assert monitor.tick(base + 1200).session.phase == "load"
    snap = monitor.tick(base + 2000)
    assert snap.session.phase == "warmup"
    spend = {p.phase: p.seconds for p in snap.session.spend_by_phase}
    assert spend == pytest.approx({"run": 1000.0, "load": 500.0, "warmup": 500.0}, abs=30)
    assert sum(spend.values()) == pytest.approx(2000.0)
    marks = sqlite3.connect(recorder.path).execute("SELECT phase, applied FROM phase_marks").fetchall()
    assert marks == [("load", 1), ("warmup", 1)]
    recorder.close()
    # an ended session takes no marks; a missing record and a bad name are one-line errors
    assert main(["phase", "run", "--record", str(recorder.path)]) == 2
    assert main(["phase", "run", "--record", str(tmp_path / "none.sqlite")]) == 2
    assert main(["phase", "lunch", "--record", str(recorder.path)]) == 2
    err = capsys.readouterr().err
    assert "has ended" in err and "no session record" in err and "invalid choice" in err


def test_unreadable_records_are_one_line_errors(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(RecordError, match="not a readable session record"):
        Recording.load(garbage)
    with pytest.raises(RecordError, match="no such file"):
        Recording.load(tmp_path / "missing.sqlite")
    # a garbage file where the session record should be: resuming refuses, naming it
    layout_path = write_layout(tmp_path)
    path = default_record_path(load_layout(layout_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(garbage.read_bytes())
    with pytest.raises(RecordError, match="cannot resume"):
        recorded_at(layout_path, 0.0)


RECORD_LAYOUT = LAYOUT


def _tick_lines(proc: subprocess.Popen[str], count: int, timeout_s: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while len(lines) < count and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    return lines


def test_sigkill_loses_at_most_one_tick_and_restart_continues(tmp_path: Path) -> None:
    layout_path = write_layout(tmp_path)
    record = tmp_path / "session.sqlite"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [infertop_bin(), "record", "--layout", str(layout_path), "--record", str(record)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = _tick_lines(proc, 6, 60.0)
        assert len(lines) == 6, proc.stderr.read() if proc.stderr else ""
        # the line for a tick is printed after its commit: the record holds every printed
        # tick, and at most the one being written when the kill lands is lost
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    printed = len(lines) + len(proc.stdout.read().splitlines() if proc.stdout else [])
    rec = Recording.load(record)
    try:
        assert rec.problems == []
        assert printed <= len(rec.ticks) <= printed + 1
        before = rec.final_session()
        last = rec.snapshot(rec.ticks[-1].id)
        assert before is not None and last is not None
        assert before.spend_usd == last.session.spend_usd  # the record's total is the live one
        started = rec.ledger.started_at if rec.ledger else None
        killed_spend = before.spend_usd or 0.0
    finally:
        rec.close()
    again = subprocess.run([*cmd, "--duration", "1", "--quiet"], capture_output=True, text=True,
                           env=env, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "resuming the session" in again.stderr
    rec = Recording.load(record)
    try:
        assert rec.ledger is not None and rec.ledger.started_at == started
        after = rec.final_session()
        assert after is not None and (after.spend_usd or 0) > killed_spend
        # one steady rate from the reservation start: the continued total is exact
        expected = RATE * (rec.ledger.last_at - started) / 3600  # type: ignore[operator]
        assert after.spend_usd == pytest.approx(expected, abs=1e-9)
    finally:
        rec.close()


def test_record_bad_layout_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\ninterval_s = -1\n")
    out = subprocess.run([infertop_bin(), "record", "--layout", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "interval_s" in out.stderr
