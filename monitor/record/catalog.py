"""The session records in a directory, summarised cheaply, and pruning the old ones.

`infertop records` lists what the state directory holds (one record per layout, plus the
archived sessions a new reservation moved aside) so that recordings do not pile up
unseen. A summary reads the metadata and two aggregates, never the snapshots: listing a
directory of multi-gigabyte records is instant. A record being written (its writer holds
the flock on RECORD.lock, see `store.lock_record`) is shown as such and never pruned.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from infertop.monitor.record import checks

SUFFIXES = ("", "-wal", "-shm", ".lock")


@dataclass(frozen=True)
class RecordSummary:
    path: Path
    cluster: str | None  # from the stored layout; None when unreadable
    started_at: float | None  # the reservation start (unix seconds)
    last_tick_at: float | None  # None: no tick yet (or unreadable)
    ticks: int | None
    size_bytes: int  # the record with its -wal and -shm
    writing: bool  # a live process holds the writer lock
    problem: str | None = None  # why some of the above is unknown

    @property
    def last_activity(self) -> float:
        """For pruning: the newest of the last tick and the file's own modification."""
        mtime = self.path.stat().st_mtime if self.path.exists() else 0.0
        return max(self.last_tick_at or 0.0, mtime)


def is_being_written(record: Path) -> bool:
    """True when a live writer holds RECORD.lock (the kernel drops a dead one's flock)."""
    try:
        fd = os.open(f"{record}.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # also drops our shared lock at once
    return False


def _size(record: Path) -> int:
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += Path(f"{record}{suffix}").stat().st_size
    return total


def summarise(record: Path) -> RecordSummary:
    writing = is_being_written(record)
    size = _size(record)
    try:
        conn = sqlite3.connect(f"file:{record}?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error as exc:
        return RecordSummary(record, None, None, None, None, size, writing, f"unreadable: {exc}")
    try:
        # the layout is the only long value; a crafted one is cut, never read whole
        meta = dict(conn.execute("SELECT key, substr(value, 1, ?) FROM meta", (checks.MAX_TEXT_BYTES,)))
        count, last = conn.execute("SELECT count(*), max(at) FROM ticks").fetchone()
    except sqlite3.Error as exc:
        return RecordSummary(record, None, None, None, None, size, writing, f"not a session record: {exc}")
    finally:
        conn.close()
    cluster: str | None = None
    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError, RecursionError):
        cluster = checks.printable(str(json.loads(meta["layout"])["cluster"]["name"]), checks.MAX_NAME_CHARS)
    started: float | None = None
    with contextlib.suppress(checks.BadValue, KeyError):
        started = checks.time_text(meta["started_at"], "started_at")
    last_at: float | None = None
    with contextlib.suppress(checks.BadValue):
        last_at = checks.time_s(last, "ticks.at") if last is not None else None
    return RecordSummary(record, cluster, started, last_at, int(count), size, writing)


def list_records(directory: Path) -> list[RecordSummary]:
    """Every `*.sqlite` record directly in `directory`, newest activity first."""
    if not directory.is_dir():
        return []
    found = [summarise(p) for p in directory.glob("*.sqlite") if p.is_file() and not p.is_symlink()]
    found.sort(key=lambda r: -r.last_activity)
    return found


def prune_candidates(records: list[RecordSummary], older_than_s: float, now: float) -> list[RecordSummary]:
    """Records idle for longer than `older_than_s`, never one being written."""
    return [r for r in records if not r.writing and now - r.last_activity > older_than_s]


def delete_record(record: Path) -> None:
    """The record and its companions (-wal, -shm, .lock). Raises OSError."""
    for suffix in SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            Path(f"{record}{suffix}").unlink()
