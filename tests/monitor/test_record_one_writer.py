"""One writer per session record (issue 19, item 11), and a `record` that could not write
its ticks says so and fails (issue 19, "Smaller"): real `infertop record` processes."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import pairwise
from pathlib import Path

import pytest

from tests.support.paths import REPO

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
# (a TUI on the same layout is no writer: it attaches, tests/cli/test_monitor_process.py)
SECOND_WRITERS = {
    "record-same-file": ["record", "--layout", "{layout}", "--record", "{record}", "--duration", "1"],
    "record-default-file": ["record", "--layout", "{layout}", "--duration", "1"],
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
    try:
        assert lock.read_text().startswith(f"{first.pid} infertop record")
    finally:
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
    (tmp_path / "state").mkdir(mode=0o700)  # private, as infertop makes it
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


# ---------------------------------------------------------------------- a full disk


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[None]:
    """A filesystem of `size` at `where`: a disk that fills up (root only)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True) if os.geteuid() == 0 else None
    if mounted is None or mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)")
    try:
        yield
    finally:  # lazily if it is still busy: never leave a mount behind
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=True)


def file_size_limit(limit_bytes: int) -> Callable[[], None]:
    """For a child: no file may grow past `limit_bytes` (writes fail with EFBIG, no SIGXFSZ)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    return limit


@pytest.mark.hostile
@pytest.mark.parametrize("disk", ["tmpfs-160k", "file-size-limit-64k"])
def test_record_on_a_full_disk_exits_1_saying_how_many_ticks_were_lost(tmp_path: Path, disk: str) -> None:
    (tmp_path / "layout.toml").write_text(LAYOUT)
    state = tmp_path / "disk"
    env = dict(env_for(tmp_path), INFERTOP_STATE_DIR=str(state))
    cmd = [sys.executable, "-m", "infertop", "record", "--layout", str(tmp_path / "layout.toml"),
           "--duration", "2.5"]
    with contextlib.ExitStack() as stack:
        limit = None
        if disk.startswith("tmpfs"):
            stack.enter_context(small_tmpfs(state, "160k"))
        else:
            limit = file_size_limit(64 * 1024)
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30, preexec_fn=limit)
        assert out.returncode == 1, out.stderr
        assert "Traceback" not in out.stderr
        last = out.stderr.strip().splitlines()[-1]
        said = re.fullmatch(r"infertop: (.+): (\d+) of (\d+) ticks were not written \((.+)\); "
                            r"the record is missing them", last)
        assert said is not None, out.stderr
        record, lost, total = Path(said[1]), int(said[2]), int(said[3])
        assert record.parent == state and 0 < lost <= total
        assert total == len(out.stdout.splitlines())  # every tick the monitor took, one line each
        with contextlib.closing(sqlite3.connect(record)) as conn:  # closed before the umount
            assert conn.execute("SELECT count(*) FROM ticks").fetchone()[0] == total - lost
