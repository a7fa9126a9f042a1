"""Crafted session records (issue 19, item 8): a genuine record written by the real
`infertop record`, damaged with sqlite3, then read back by real `report`, `replay` and the
resume path of `record` under a memory bound: each says what is wrong in one line and
exits 2, in seconds, never a traceback, never `$nan`."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.waiting import until

LAYOUT = """
[cluster]
name = "hostile-record"
interval_s = 0.2
[session]
budget_usd = 100
[pricing]
gpu_hour_usd = 36.0
[[nodes]]
name = "d1"
role = "decode"
gpus = 2
"""
MEMORY_LIMIT_BYTES = 1 << 30  # the runaway report took 2.9 GB, the bomb 2 GB
BOMB_BYTES = (1 << 30) + (1 << 28)  # inflates past the memory limit on its own
TIMEOUT_S = 120.0  # a command that has not finished by then has run away (generous: a loaded host is slow)


def limit_memory() -> None:
    """In the child, before exec: no more than MEMORY_LIMIT_BYTES of address space."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def infertop_env(state_dir: Path) -> dict[str, str]:
    # this checkout's code, two malloc arenas (the address-space limit counts reservations)
    return dict(os.environ, PYTHONPATH=str(REPO), INFERTOP_STATE_DIR=str(state_dir),
                PYTHONUNBUFFERED="1", MALLOC_ARENA_MAX="2")


def infertop(args: list[str], state_dir: Path, timeout_s: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True, text=True,
                          env=infertop_env(state_dir), timeout=timeout_s, preexec_fn=limit_memory)


def one_error_line(out: subprocess.CompletedProcess[str], path: Path) -> str:
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr, out.stderr
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("infertop: ") and str(path) in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session record written by the real `infertop record` (7 or so ticks), ended."""
    work = tmp_path_factory.mktemp("genuine")
    layout = work / "layout.toml"
    layout.write_text(LAYOUT)
    record = work / "session.sqlite"
    out = infertop(["record", "--layout", str(layout), "--record", str(record), "--duration", "1.3",
                    "--quiet"], work / "state")
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(record) as conn:
        assert conn.execute("SELECT count(*) FROM ticks").fetchone()[0] >= 4
    return record


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A zlib stream of about a megabyte that inflates to BOMB_BYTES of spaces."""
    packer = zlib.compressobj(9)
    chunk = b" " * (1 << 22)
    parts = [packer.compress(chunk) for _ in range(BOMB_BYTES // len(chunk))]
    return b"".join(parts) + packer.flush()


def copy_of(genuine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(genuine, path)
    return path


# ---------------------------------------------------------------------- damage


Damage = Callable[[sqlite3.Connection], None]


def sql(statement: str) -> Damage:
    return lambda conn: conn.execute(statement) and None


def ledger(edit: Callable[[dict[str, object]], object]) -> Damage:
    """Edit the ledger's JSON state in place (Python's json writes NaN/Infinity as asked)."""

    def damage(conn: sqlite3.Connection) -> None:
        state = json.loads(conn.execute("SELECT state FROM ledger").fetchone()[0])
        edit(state)
        conn.execute("UPDATE ledger SET state = ?", (json.dumps(state),))

    return damage


def ledger_text(text: str) -> Damage:
    return lambda conn: conn.execute("UPDATE ledger SET state = ?", (text,)) and None


NESTED = "[" * 100_000 + "]" * 100_000

# name → (damage, what the one line must say)
REPORT_CASES: dict[str, tuple[Damage, str]] = {
    "tick-at-far-future": (sql("UPDATE ticks SET at = 1e12 WHERE id = (SELECT max(id) FROM ticks)"), "tick"),
    "tick-at-far-past": (sql("UPDATE ticks SET at = -1e10 WHERE id = 1"), "tick 1"),
    "tick-at-backwards": (sql("UPDATE ticks SET at = at - 3600 WHERE id = 3"), "tick 3"),
    "tick-at-infinite": (sql("UPDATE ticks SET at = 9e999 WHERE id = 2"), "tick 2"),
    "tick-at-text": (sql("UPDATE ticks SET at = 'soon' WHERE id = 2"), "tick 2"),
    "tick-spend-nan": (sql("UPDATE ticks SET spend_usd = 'NaN' WHERE id = 2"), "tick 2"),
    "tick-spend-overflow": (sql("UPDATE ticks SET spend_usd = '1e999999999' WHERE id = 2"), "tick 2"),
    "tick-spend-million-digits": (
        sql("UPDATE ticks SET spend_usd = printf('%.*c', 1000000, '9') WHERE id = 2"), "tick 2"),
    "tick-phase-escape-blob": (sql("UPDATE ticks SET phase = x'1b5d303b7077'||x'07' WHERE id = 2"), "tick 2"),
    "tick-tokens-negative": (sql("UPDATE ticks SET output_tokens = -1e300 WHERE id = 2"), "tick 2"),
    "ledger-spend-nan": (ledger(lambda s: s.update(spend_usd="NaN")), "spend_usd"),
    "ledger-spend-overflow": (ledger(lambda s: s.update(spend_usd="1e999999999")), "spend_usd"),
    "ledger-phase-spend-overflow": (
        ledger(lambda s: s.update(spend_by_phase={"run": "-1e999999999"})), "spend_by_phase"),
    "ledger-deeply-nested": (ledger_text(NESTED), "JSON"),
    "ledger-tally-deeply-nested": (
        ledger(lambda s: s.update(tally=json.loads("[" * 900 + "]" * 900))), "JSON"),
    "ledger-started-far-past": (ledger(lambda s: s.update(started_at=-1e10)), "started_at"),
    "ledger-last-at-far-future": (ledger(lambda s: s.update(last_at=1e12)), "last_at"),
    "ledger-tokens-infinite": (ledger(lambda s: s.update(output_tokens=float("inf"))), "output_tokens"),
    "ledger-ticks-bignum": (ledger(lambda s: s.update(ticks=10**400)), "ticks"),
    "ledger-phase-not-a-phase": (ledger(lambda s: s.update(phase={"run": [1]})), "phase"),
    "ledger-mark-far-future": (ledger(lambda s: s.update(marks=[[1e12, "load"]])), "marks"),
    "meta-resumes-not-a-number": (sql("INSERT OR REPLACE INTO meta VALUES ('resumes', 'many')"), "resumes"),
}


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(REPORT_CASES))
def test_report_on_a_crafted_record_says_what_is_wrong(genuine: Path, tmp_path: Path, case: str) -> None:
    damage, says = REPORT_CASES[case]
    path = copy_of(genuine, tmp_path)
    with sqlite3.connect(path) as conn:
        damage(conn)
    out_dir = tmp_path / "out"
    # a report that runs away is stopped by the command's timeout (TimeoutExpired fails the test)
    out = infertop(["report", str(path), "--out", str(out_dir)], tmp_path / "state")
    assert out.returncode == 2, out.stdout + out.stderr
    line = one_error_line(out, path)
    assert says in line, line
    # whatever was readable is still reported, and no figure in it is a NaN or infinity
    md = (out_dir / "report.md").read_text()
    assert "The recording is damaged" in md
    figures = md.split("## Trial", 1)[1]  # after the list of what is damaged
    assert not re.search(r"\b(nan|inf|infinity)\b", figures, re.IGNORECASE), figures


@pytest.mark.hostile
def test_report_on_a_record_of_zlib_bombs_stays_bounded(genuine: Path, tmp_path: Path, bomb: bytes) -> None:
    # no ledger: the report falls back on the ticks' snapshots, every one of them a bomb
    path = copy_of(genuine, tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM ledger")
        conn.execute("UPDATE ticks SET snapshot = ?", (bomb,))
    out = infertop(["report", str(path), "--out", str(tmp_path / "out")], tmp_path / "state")
    assert out.returncode == 2, out.stderr
    assert "ledger" in one_error_line(out, path)


# ---------------------------------------------------------------------- resume


RESUME_CASES: dict[str, tuple[Damage, str]] = {
    name: REPORT_CASES[name] for name in (
        "ledger-spend-nan", "ledger-spend-overflow", "ledger-deeply-nested",
        "ledger-last-at-far-future", "ledger-tokens-infinite", "ledger-phase-not-a-phase",
        "ledger-mark-far-future", "meta-resumes-not-a-number",
    )
}
RESUME_CASES["meta-started-at-not-a-time"] = (
    sql("UPDATE meta SET value = 'yesterday' WHERE key = 'started_at'"), "started_at")
RESUME_CASES["meta-started-at-far-future"] = (
    sql("UPDATE meta SET value = '1e300' WHERE key = 'started_at'"), "started_at")
RESUME_CASES["meta-layout-oversized"] = (
    sql("UPDATE meta SET value = printf('%.*c', 80000000, ' ') WHERE key = 'layout'"), "layout")


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_record_refuses_to_resume_a_crafted_record(genuine: Path, tmp_path: Path, case: str) -> None:
    damage, says = RESUME_CASES[case]
    path = copy_of(genuine, tmp_path)
    with sqlite3.connect(path) as conn:
        if not case.startswith("meta-started-at"):
            conn.execute("DELETE FROM meta WHERE key = 'ended_at'")  # a crash: resumed, not archived
        damage(conn)
    layout = tmp_path / "layout.toml"
    layout.write_text(LAYOUT)
    out = infertop(["record", "--layout", str(layout), "--record", str(path), "--duration", "0.5",
                    "--quiet"], tmp_path / "state")
    assert out.returncode == 2, out.stderr
    assert says in one_error_line(out, path)


# ---------------------------------------------------------------------- replay


REPLAY_CASES: dict[str, Callable[[sqlite3.Connection, bytes], None]] = {
    "snapshot-zlib-bomb": lambda conn, bomb: conn.execute(
        "UPDATE ticks SET snapshot = ? WHERE id > 1", (bomb,)) and None,
    "snapshot-not-zlib": lambda conn, _: conn.execute(
        "UPDATE ticks SET snapshot = x'1b5d303b70776e6564' WHERE id > 1") and None,
    "tick-at-far-future": lambda conn, _: conn.execute(
        "UPDATE ticks SET at = 1e12 WHERE id = (SELECT max(id) FROM ticks)") and None,
}


def _tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-S", socket, *args], capture_output=True, text=True, timeout=30)


@pytest.mark.hostile
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("case", sorted(REPLAY_CASES))
def test_replay_of_a_crafted_record_quits_on_q_and_says_what_is_wrong(
    genuine: Path, tmp_path: Path, bomb: bytes, case: str
) -> None:
    path = copy_of(genuine, tmp_path)
    with sqlite3.connect(path) as conn:
        REPLAY_CASES[case](conn, bomb)
    socket = str(tmp_path / f"tmux-{uuid.uuid4().hex[:8]}.sock")
    exit_file = tmp_path / "exit-code"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "TERM": "xterm-256color", "PYTHONPATH": str(REPO), "MALLOC_ARENA_MAX": "2"}
    # the real command in a real terminal, its address space capped as in the other tests
    command = (f"ulimit -v {MEMORY_LIMIT_BYTES // 1024}; env -u COLUMNS -u LINES "
               f"{sys.executable} -m infertop replay --speed 5 {path}; echo $? > {exit_file}; sleep 60")
    args = ["new-session", "-d", "-s", "replay", "-x", "200", "-y", "50"]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    assert _tmux(socket, *args, command).returncode == 0
    try:
        pane = lambda: _tmux(socket, "capture-pane", "-p", "-J", "-t", "replay").stdout  # noqa: E731
        until(lambda: "Quit" in pane() or exit_file.exists(), 30, "the replay on screen", every_s=0.1,
              detail=pane)
        before = pane()
        _tmux(socket, "send-keys", "-t", "replay", "9")  # the last frame: damaged in each case
        until(lambda: pane() != before or exit_file.exists(), 30, "the replay to take the key", every_s=0.1,
              detail=pane)
        _tmux(socket, "send-keys", "-t", "replay", "q")
        until(lambda: exit_file.exists() and exit_file.read_text().strip() != "", 10, "the replay to quit",
              every_s=0.1, detail=pane)
        screen = pane()
        assert exit_file.read_text().strip() == "2", screen
        lines = [line for line in screen.splitlines() if line.startswith("infertop: ")]
        assert len(lines) == 1 and str(path) in lines[0], screen
        assert "Traceback" not in screen and "MemoryError" not in screen
    finally:
        _tmux(socket, "kill-server")


# ---------------------------------------------------------------------- phase marks


HOSTILE_MARKS: dict[str, tuple[object, object]] = {
    "mark-at-far-future": (1e12, "load"),
    "mark-at-far-past": (-1e10, "load"),
    "mark-at-text": ("soon", "load"),
    "mark-phase-unknown": (None, "lunch"),
    "mark-phase-escape": (None, "\x1b]0;pwned\x07"),
    "mark-phase-blob": (None, b"load"),
}


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(HOSTILE_MARKS))
def test_a_crafted_phase_mark_is_dropped_and_the_session_goes_on(genuine: Path, tmp_path: Path, case: str) -> None:
    # the `phase_marks` table is the CLI's way in: anyone who can write the file can add rows
    path = copy_of(genuine, tmp_path)
    at, phase = HOSTILE_MARKS[case]
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'ended_at'")  # a crash: the next record resumes
        conn.execute("INSERT INTO phase_marks (at, phase, origin) VALUES (?, ?, 'cli')",
                     (time.time() if at is None else at, phase))
    layout = tmp_path / "layout.toml"
    layout.write_text(LAYOUT)
    out = infertop(["record", "--layout", str(layout), "--record", str(path), "--duration", "0.6",
                    "--quiet"], tmp_path / "state")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "phase mark" in out.stderr and "ignored" in out.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT applied FROM phase_marks").fetchall() == [(1,)]  # not retried
    # the record stays whole: its report is clean, its phase unchanged
    report = infertop(["report", str(path), "--out", str(tmp_path / "out")], tmp_path / "state")
    assert report.returncode == 0, report.stderr
    assert "| run |" in (tmp_path / "out" / "report.md").read_text()
