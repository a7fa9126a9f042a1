"""One writer per session record (issue 19, item 11), and a `record` that could not write
its ticks says so and fails (issue 19, "Smaller"): real `infertop record` processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from decimal import Decimal
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import REPO

LAYOUT = """
[cluster]
name = "one-writer"
interval_s = 0.2
[pricing]
gpu_hour_usd = 36.0
[[nodes]]
name = "d1"
role = "decode"
gpus = 2
"""


def env_for(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
                INFERTOP_STATE_DIR=str(tmp_path / "state"))


def start_record(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """`infertop record` on the test's layout, running until stopped; its first tick printed."""
    cmd = [sys.executable, "-m", "infertop", "record", "--layout", str(tmp_path / "layout.toml"), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(tmp_path), stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the first tick is committed: the record is ours
    assert first, proc.stderr.read() if proc.stderr else ""
    return proc


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


# the second writer, by how it finds the record: → argv after `python -m infertop`
SECOND_WRITERS = {
    "record-same-file": ["record", "--layout", "{layout}", "--record", "{record}", "--duration", "1"],
    "record-default-file": ["record", "--layout", "{layout}", "--duration", "1"],
    "tui-recording": ["--layout", "{layout}", "--record", "{record}"],
}


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(SECOND_WRITERS))
def test_a_second_writer_exits_2_naming_the_first(tmp_path: Path, case: str) -> None:
    (tmp_path / "layout.toml").write_text(LAYOUT)
    record = tmp_path / "state" / "session.sqlite"
    default = case == "record-default-file"
    first = start_record(tmp_path, *([] if default else ["--record", str(record)]))
    try:
        if default:
            record = next((tmp_path / "state").glob("one-writer-*.sqlite"))
        argv = [a.format(layout=tmp_path / "layout.toml", record=record) for a in SECOND_WRITERS[case]]
        second = subprocess.run([sys.executable, "-m", "infertop", *argv], capture_output=True, text=True,
                                env=env_for(tmp_path), stdin=subprocess.DEVNULL, timeout=30)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"record {record} is being written by pid {first.pid} (infertop record" in lines[0]
        assert lines[0].endswith("attach or stop it")
        assert first.poll() is None  # the first writer never noticed
    finally:
        assert stop(first) == 0
    # one writer's ticks: strictly later each time, spend never going back
    with sqlite3.connect(record) as conn:
        rows = conn.execute("SELECT at, spend_usd FROM ticks ORDER BY id").fetchall()
    assert len(rows) >= 2
    assert all(a[0] < b[0] for a, b in pairwise(rows))
    assert all(Decimal(a[1]) <= Decimal(b[1]) for a, b in pairwise(rows))


def test_a_killed_writer_does_not_block_the_next(tmp_path: Path) -> None:
    (tmp_path / "layout.toml").write_text(LAYOUT)
    record = tmp_path / "state" / "session.sqlite"
    first = start_record(tmp_path, "--record", str(record))
    lock = Path(f"{record}.lock")
    assert lock.read_text().startswith(f"{first.pid} infertop record")
    assert stop(first, signal.SIGKILL) == -signal.SIGKILL
    assert lock.read_text().startswith(f"{first.pid} ")  # the dead writer's file is still there...
    # ...but its flock died with it: the next writer takes the record and resumes the session
    again = subprocess.run([sys.executable, "-m", "infertop", "record", "--layout", str(tmp_path / "layout.toml"),
                            "--record", str(record), "--duration", "0.6", "--quiet"],
                           capture_output=True, text=True, env=env_for(tmp_path), timeout=30)
    assert again.returncode == 0, again.stderr
    assert "resuming the session" in again.stderr
    assert os.stat(lock).st_mode & 0o777 == 0o600


@pytest.mark.hostile
def test_the_lock_file_is_not_followed_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "layout.toml").write_text(LAYOUT)
    (tmp_path / "state").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    record = tmp_path / "state" / "session.sqlite"
    Path(f"{record}.lock").symlink_to(victim)
    out = subprocess.run([sys.executable, "-m", "infertop", "record", "--layout", str(tmp_path / "layout.toml"),
                          "--record", str(record), "--duration", "0.5"],
                         capture_output=True, text=True, env=env_for(tmp_path), timeout=30)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "cannot lock the session record" in out.stderr
    assert victim.read_text() == "keep me\n"

