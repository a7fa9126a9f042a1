"""The session record: one SQLite file (WAL) per session, written tick by tick.

Each tick is one transaction: the tick's figures, its Snapshot (zlib-compressed JSON) and
the ledger's whole state. A process killed mid-session therefore loses at most the tick
being written, and a restart on the same layout reads the ledger back and continues it.
WAL with `synchronous=NORMAL` survives a killed process (not a power cut) without an
fsync per tick; that is the trade a monitor that commits every second should make.

Phase marks from the command line (`infertop phase load`) go through the same file: the
CLI inserts a row into `phase_marks`, the running session applies it before its next tick.

A record is private: the state directory is created 0700 (an existing one open to other
users is reported), the record file 0600 before SQLite opens it (SQLite gives its -wal and
-shm files the database's mode), and the layout it keeps has every URL's password and
secret-looking query values masked (replay and report need no credentials).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import re
import shlex
import sqlite3
import stat
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic_core

from collectors.safe_text import redact_url
from layouts.model import Layout, Thresholds
from monitor.evaluation.ledger import PHASES, SessionLedger, energy_usd_per_kwh, reservation_end
from monitor.evaluation.link_summary import with_link_judgments
from monitor.evaluation.scoreboard import LIVE_POINT_FIELDS, with_live_point
from monitor.record import checks as check
from monitor.record.places import PRIVATE_DIR_MODE, layout_key, state_dir
from monitor.snapshot import SessionView, Snapshot, snapshot_json

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ticks (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    phase TEXT NOT NULL,
    cost_per_hour_usd REAL,
    spend_usd TEXT,
    idle_spend_usd TEXT,
    api_equivalent_usd TEXT,
    output_tokens REAL,
    requests_finished REAL,
    accepted_tokens_per_s REAL,
    idle_fraction REAL,
    snapshot BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phase_marks (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    phase TEXT NOT NULL,
    origin TEXT NOT NULL,
    applied INTEGER NOT NULL DEFAULT 0
);
"""


class RecordError(ValueError):
    """A record that cannot be used. `str()` is the one-line message for the user."""


def default_record_path(layout: Layout) -> Path:
    return state_dir() / f"{layout_key(layout)}.sqlite"


PRIVATE_FILE_MODE = 0o600
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")


def _private_dir(directory: Path) -> None:
    """Create `directory` 0700; say so when the state directory is open to other users.

    An existing directory is never chmod-ed (it may be shared, e.g. a pointed-to /tmp):
    the record in it is 0600 either way, but its name (the cluster's) is visible.
    """
    directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    if directory.resolve() == state_dir().resolve():
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & 0o077:
            log.warning("state directory %s is open to other users (mode %s): chmod 700 %s",
                        directory, oct(mode), directory)


def _create_private_file(path: Path) -> None:
    """An empty file that only its owner can read, made before SQLite opens the path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    os.close(fd)


def _tighten(path: Path) -> None:
    """A record (and its -wal, -shm) from before records were private: make it 0600."""
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            mode = part.lstat().st_mode
            # a regular file only: chmod follows symlinks, and a link is not ours to change
            if stat.S_ISREG(mode) and stat.S_IMODE(mode) & 0o077:
                try:
                    part.chmod(PRIVATE_FILE_MODE)
                except OSError as exc:
                    log.warning("%s is open to other users and cannot be made private: %s", part, exc)


def _redact_urls(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url(value) if _URL.fullmatch(value) else value
    if isinstance(value, list):
        return [_redact_urls(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_urls(v) for k, v in value.items()}
    return value


def stored_layout_json(layout: Layout) -> str:
    """The layout as a record keeps it: every URL-valued string without its secrets.

    Only whole-URL strings change (a log pattern that holds `key=` is left alone), so
    the stored text still validates as a Layout for replay and report.
    """
    return json.dumps(_redact_urls(layout.model_dump(mode="json")), separators=(",", ":"))


def _connect(path: Path, any_thread: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=not any_thread
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _describe(exc: sqlite3.Error) -> str:
    return str(exc) or type(exc).__name__


def _unresumable(path: Path, why: str) -> RecordError:
    return RecordError(f"{path}: cannot resume this session record ({why}); "
                       "move it away or pass --record FILE")


def encode_snapshot(snapshot: Snapshot) -> bytes:
    # pydantic's own JSON writer: the same compact text as json.dumps of the dumped dict,
    # 3x faster (128 nodes × 8 GPUs: ~4 ms instead of ~13 ms a tick; benchmarks/bench_tui);
    # fields at their default left out, as on the channel (pydantic fills them back in
    # `decode_snapshot`): 43 % less to compress and to read back at 128 realistic nodes
    # (the text the viewers' channel sends too, written once: `snapshot_json`)
    return zlib.compress(snapshot_json(snapshot), 6)


def inflate(blob: object, limit: int = check.MAX_SNAPSHOT_BYTES) -> bytes:
    """A zlib stream inflated to at most `limit` bytes: a bomb stops there, as a ValueError."""
    if not isinstance(blob, bytes):
        raise ValueError(f"not compressed data ({type(blob).__name__})")
    inflater = zlib.decompressobj()
    data = inflater.decompress(blob, limit)
    if inflater.unconsumed_tail:
        raise ValueError(f"inflates to more than {limit // check.MIB} MiB")
    if not inflater.eof:
        raise ValueError("the compressed data is cut short")
    return data


def decode_snapshot(blob: object) -> Snapshot:
    """A recorded Snapshot; ValueError (or zlib.error) when it is not one. The JSON parser
    (pydantic's) stops at 200 levels of nesting, so depth needs no check of its own."""
    snapshot = Snapshot.model_validate_json(inflate(blob))
    if not {"ttft_pool", "itl_pool"} <= snapshot.session.model_fields_set:
        # recorded before the monitor chose the scoreboard's latency pools (or chose none):
        # chosen now from the recorded roll-ups, as the monitor would have
        session = with_live_point(snapshot.session, snapshot.cluster)
        snapshot = snapshot.model_copy(update={"session": session})
    return snapshot


def parse_json(raw: object, what: str) -> Any:
    """JSON text read from a record, nested at most 200 deep (its values are checked after)."""
    if not isinstance(raw, str):
        raise ValueError(f"{what} is not text ({type(raw).__name__})")
    try:
        return pydantic_core.from_json(raw, allow_inf_nan=True)
    except ValueError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc})") from None


def reading(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Bound every value this connection reads: SQLite refuses one bigger than this
    ("string or blob too big") instead of loading a crafted gigabyte into memory."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, check.MAX_TEXT_BYTES)
    return conn


# the meta keys infertop writes, and how each is checked when read back
_META_CHECKS: dict[str, Callable[[object, str], object]] = {
    "schema": lambda v, f: check.choice(v, f, {str(SCHEMA_VERSION)}),
    "created_at": check.time_text,
    "started_at": check.time_text,
    "ended_at": check.time_text,
    "layout": lambda v, f: check.text(v, f, check.MAX_TEXT_BYTES),
    "layout_path": lambda v, f: check.text(v, f, check.MAX_PATH_CHARS),
    "resumes": lambda v, f: check.integer_text(v, f, 10**6),
}


def read_meta(conn: sqlite3.Connection) -> tuple[dict[str, str], list[str]]:
    """The record's known meta keys that pass their checks, and a line for each that does not."""
    meta: dict[str, str] = {}
    problems: list[str] = []
    for key, checked in _META_CHECKS.items():
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.DataError:
            problems.append(f"meta {key}: larger than {check.MAX_TEXT_BYTES // check.MIB} MiB")
            continue
        if row is None:
            continue
        try:
            checked(row[0], key)
        except check.BadValue as exc:
            problems.append(f"meta {exc}")
            continue
        meta[key] = row[0]
    return meta, problems


def read_ledger_state(conn: sqlite3.Connection) -> Any:
    """The ledger's JSON state, parsed (not yet checked: `SessionLedger.from_state` does)."""
    try:
        row = conn.execute("SELECT state FROM ledger WHERE id = 1").fetchone()
    except sqlite3.DataError:
        raise ValueError(f"the ledger state is larger than {check.MAX_TEXT_BYTES // check.MIB} MiB") from None
    if row is None:
        raise ValueError("no ledger row")
    return parse_json(row[0], "the ledger state")


@dataclass
class TickJob:
    """One tick's row, taken on the monitor's thread; written by `SessionStore.commit_tick`.

    Everything that the next tick mutates (the ledger) is copied out here, as text; the
    Snapshot is immutable, so encoding it can wait for the writer.
    """

    at: float
    phase: str
    spend_usd: str | None
    idle_spend_usd: str | None
    api_equivalent_usd: str | None
    ledger_state: str
    snapshot: Snapshot
    mark_ids: list[int] = field(default_factory=list)


class WriterLock:
    """One writer per record: an exclusive `flock` on RECORD.lock, held while writing.

    Two `record` processes on one layout both wrote ticks (duplicates, spend going back).
    The lock file says who holds it (pid and command), for the second one's error. The
    kernel releases a flock when its holder dies, SIGKILL included, so a stale lock file
    never blocks the next writer; the file itself is left in place (unlinking it would
    let a waiting writer and a new one lock two different files).
    """

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, record: Path) -> WriterLock:
        """Lock `record` for this process; RecordError naming the holder when it is taken."""
        path = Path(f"{record}.lock")
        try:
            # O_NOFOLLOW: a symlink planted here must not make us create or truncate its target
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise RecordError(f"{path}: cannot lock the session record: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise RecordError(f"record {record} is being written by {holder}; attach or stop it") from None
        except OSError as exc:
            os.close(fd)
            raise RecordError(f"{path}: cannot lock the session record: {exc.strerror or exc}") from None
        with contextlib.suppress(OSError):  # who holds it is a courtesy: a full disk may refuse it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {_command_line()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)  # while still held: no one else has written yet
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None


def _command_line() -> str:
    """This process's command, as the holder's description in a second writer's error."""
    argv = sys.argv or ["python"]
    # `python -m infertop …` runs infertop/__main__.py: name it as the user typed it
    program = "infertop" if argv[0].endswith("__main__.py") else Path(argv[0]).name
    return check.printable(shlex.join([program, *argv[1:]]))


command_line = _command_line  # also the monitor lock's holder (monitor/channel/paths.py)


def _lock_holder(fd: int) -> str:
    """'pid 1234 (infertop record …)' from a lock file (written by any process: made inert)."""
    raw = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    pid, _, command = raw.partition(" ")
    if not pid.isascii() or not pid.isdigit():
        return "another process"
    return f"pid {pid} ({check.printable(command)})" if command else f"pid {pid}"


# the CLI adds a mark per command; more unapplied rows than this wait for the next tick
_MARKS_PER_TICK = 100


class SessionStore:
    """The writer side of one record file."""

    def __init__(self, path: Path, conn: sqlite3.Connection, ledger: SessionLedger, resumed: bool):
        self.path = path
        self.conn = conn  # the monitor's thread: open, phase marks, close
        # tick rows go through their own connection so that a background writer (Recorder)
        # and the monitor's phase-mark reads never share one; WAL lets them run side by side
        self.write_conn = _connect(path, any_thread=True)
        self.ledger = ledger
        self.resumed = resumed
        self.ticks_written = 0
        self._seen_marks: set[int] = set()  # ever handed to the ledger (never twice)
        self._taken_marks: list[int] = []  # handed over, not yet in a prepared tick
        self._unflushed_marks: list[int] = []  # in a tick whose commit failed: retried
        self.lock: WriterLock | None = None  # set by `open`, released by `close`

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(cls, layout: Layout, path: Path | None, fresh_ledger: SessionLedger) -> SessionStore:
        """Open the record for `layout`, resuming its session when it is still open.

        A record is resumed when it did not end cleanly (a crash) or when the layout pins
        the same reservation start; a cleanly ended one is kept under a dated name and a
        new session begins. Raises RecordError for a record that cannot be read.
        """
        path = path if path is not None else default_record_path(layout)
        try:
            _private_dir(path.parent)
        except OSError as exc:
            raise RecordError(f"{path.parent}: cannot create the state directory: {exc}") from None
        lock = WriterLock.take(path)  # before reading: a second writer must not even archive
        try:
            store = cls._open_locked(layout, path, fresh_ledger)
        except BaseException:
            lock.release()
            raise
        store.lock = lock
        return store

    @classmethod
    def _open_locked(cls, layout: Layout, path: Path, fresh_ledger: SessionLedger) -> SessionStore:
        if path.exists() and path.stat().st_size > 0:
            meta, state = cls._read_existing(path)
            try:
                ledger = SessionLedger.from_state(state, prices=layout.pricing.api)
            except ValueError as exc:
                raise _unresumable(path, str(exc)) from None
            pinned = layout.session.reservation_start
            same_start = pinned is not None and abs(pinned.timestamp() - ledger.started_at) < 1e-6
            if "ended_at" not in meta or same_start:
                _tighten(path)
                return cls._resume(path, layout, meta, ledger)
            cls._archive(path, meta)
        return cls._create(path, layout, fresh_ledger)

    @staticmethod
    def _read_existing(path: Path) -> tuple[dict[str, str], Any]:
        """The meta and ledger state of the record to resume; any fault is a RecordError."""
        try:
            conn = reading(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S))
            try:
                meta, problems = read_meta(conn)
                if problems:
                    raise _unresumable(path, problems[0])
                if meta.get("schema") != str(SCHEMA_VERSION):
                    raise RecordError(f"{path}: not an infertop session record (no schema)")
                try:
                    state = read_ledger_state(conn)
                except ValueError as exc:
                    raise _unresumable(path, str(exc)) from None
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise _unresumable(path, _describe(exc)) from None
        return meta, state

    @classmethod
    def _resume(
        cls, path: Path, layout: Layout, meta: dict[str, str], ledger: SessionLedger
    ) -> SessionStore:
        # the layout may have changed its budget or task count since; its word is the latest
        ledger.budget_usd = layout.session.budget_usd
        ledger.acceptable_tasks = layout.session.acceptable_tasks
        ledger.ends_at = reservation_end(layout, ledger.started_at)
        ledger.energy_usd_per_kwh = energy_usd_per_kwh(layout)
        ledger.resumed = True  # the stretch since the last tick was not watched
        conn = _connect(path)
        conn.execute("DELETE FROM meta WHERE key = 'ended_at'")
        resumes = int(meta.get("resumes", "0")) + 1
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('resumes', ?)", (str(resumes),))
        return cls(path, conn, ledger, resumed=True)

    @classmethod
    def _create(cls, path: Path, layout: Layout, ledger: SessionLedger) -> SessionStore:
        for suffix in ("", "-wal", "-shm"):  # an empty leftover or a stale WAL of nothing
            with contextlib.suppress(FileNotFoundError):
                Path(f"{path}{suffix}").unlink()
        try:
            _create_private_file(path)
            conn = _connect(path)
            conn.executescript(_DDL)
        except OSError as exc:
            raise RecordError(f"{path}: cannot create the session record ({exc.strerror or exc})") from None
        except sqlite3.Error as exc:
            raise RecordError(f"{path}: cannot create the session record ({_describe(exc)})") from None
        meta = {
            "schema": str(SCHEMA_VERSION),
            "created_at": repr(time.time()),
            "started_at": repr(ledger.started_at),
            "layout": stored_layout_json(layout),
            "layout_path": layout.source_path or "",
        }
        conn.execute("BEGIN")
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
        conn.execute(
            "INSERT OR REPLACE INTO ledger VALUES (1, ?)", (json.dumps(ledger.to_state()),)
        )
        conn.execute("COMMIT")
        return cls(path, conn, ledger, resumed=False)

    @staticmethod
    def _archive(path: Path, meta: dict[str, str]) -> None:
        started = float(meta.get("started_at", "0") or 0)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
        target = path.with_name(f"{path.stem}-{stamp}{path.suffix}")
        n = 1
        while target.exists():
            target = path.with_name(f"{path.stem}-{stamp}-{n}{path.suffix}")
            n += 1
        path.rename(target)

    # ----------------------------------------------------------------- writing

    def take_phase_marks(self) -> list[tuple[int, float, str]]:
        """Marks added from outside (the CLI) and not yet applied: (id, at, phase).

        They are flagged applied by the next `write_tick`, in the same transaction as the
        ledger that holds them, so a crash in between neither loses nor repeats one.
        """
        rows = self.conn.execute(
            "SELECT id, at, phase FROM phase_marks WHERE applied = 0 ORDER BY id LIMIT ?",
            (_MARKS_PER_TICK,),
        ).fetchall()
        marks: list[tuple[int, float, str]] = []
        for mark_id, at, phase in rows:
            # a mark already handed over stays unapplied in the file until its tick commits
            # (later, when a background writer is behind): never hand it to the ledger twice
            if mark_id in self._seen_marks:
                continue
            self._seen_marks.add(mark_id)
            self._taken_marks.append(mark_id)  # flagged applied with the tick, used or not
            try:
                when = check.near(check.time_s(at, "at"), self.ledger.started_at, "at")
                marks.append((mark_id, when, check.choice(phase, "phase", PHASES)))
            except check.BadValue as exc:  # anyone who can write the file can add a row
                log.warning("phase mark %d ignored: %s", mark_id, exc)
        return marks

    def write_tick(self, snapshot: Snapshot, at: float) -> None:
        """One transaction: the tick's figures, its snapshot and the ledger state."""
        self.commit_tick(self.prepare_tick(snapshot, at))

    def prepare_tick(self, snapshot: Snapshot, at: float) -> TickJob:
        """What `commit_tick` writes, copied out of the ledger now (the monitor's thread)."""
        ledger = self.ledger
        marks, self._taken_marks = self._taken_marks, []
        return TickJob(
            at=at,
            phase=ledger.phase,
            spend_usd=str(ledger.spend_usd) if ledger.priced else None,
            idle_spend_usd=str(ledger.idle_spend_usd) if ledger.priced else None,
            api_equivalent_usd=str(ledger.api_equivalent_usd) if ledger.tokens_known else None,
            # dumped now: the tally's dicts change in place at the next sample
            ledger_state=json.dumps(ledger.to_state()),
            snapshot=snapshot,
            mark_ids=marks,
        )

    def commit_tick(self, job: TickJob) -> None:
        """Write one prepared tick as one transaction (any thread, one at a time)."""
        s = job.snapshot.session
        blob = encode_snapshot(job.snapshot)  # JSON + zlib: the heavy part, outside the transaction
        marks = self._unflushed_marks + job.mark_ids
        conn = self.write_conn
        conn.execute("BEGIN")
        try:
            conn.execute(
                "INSERT INTO ticks (at, phase, cost_per_hour_usd, spend_usd, idle_spend_usd,"
                " api_equivalent_usd, output_tokens, requests_finished, accepted_tokens_per_s,"
                " idle_fraction, snapshot) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job.at,
                    job.phase,
                    s.cost_per_hour_usd,
                    job.spend_usd,
                    job.idle_spend_usd,
                    job.api_equivalent_usd,
                    s.accepted_tokens,
                    s.requests_finished,
                    s.accepted_tokens_per_s,
                    s.idle_fraction,
                    blob,
                ),
            )
            conn.execute("INSERT OR REPLACE INTO ledger VALUES (1, ?)", (job.ledger_state,))
            conn.executemany("UPDATE phase_marks SET applied = 1 WHERE id = ?", [(i,) for i in marks])
            conn.execute("COMMIT")
            self._unflushed_marks = []
        except BaseException:
            # the ledger already holds these marks: flag them applied with the next tick
            self._unflushed_marks = marks
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self.ticks_written += 1

    def close(self, ended: bool = True) -> None:
        """Mark the session ended (a restart then begins a new one) and close the file."""
        self.write_conn.close()  # first: the checkpoint below wants no other connection
        try:
            if ended:
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('ended_at', ?)", (repr(time.time()),))
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        finally:
            self.conn.close()
            if self.lock is not None:  # last: another writer may take the file from here
                self.lock.release()
                self.lock = None


def add_phase_mark(path: Path, phase: str, at: float, origin: str = "cli") -> None:
    """Ask the session writing `path` to switch phase at `at` (applied at its next tick)."""
    if not path.exists():
        raise RecordError(f"{path}: no session record here (is infertop running on this layout?)")
    try:
        # bounded reads: a crafted meta value of a gigabyte is refused, not loaded
        conn = reading(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None))
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("schema") != str(SCHEMA_VERSION):
                raise RecordError(f"{path}: not an infertop session record")
            if "ended_at" in meta:
                raise RecordError(f"{path}: this session has ended; start infertop on the layout first")
            conn.execute(
                "INSERT INTO phase_marks (at, phase, origin) VALUES (?, ?, ?)", (at, phase, origin)
            )
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise RecordError(f"{path}: cannot mark the phase ({_describe(exc)})") from None


class Recorder:
    """The session record of one monitor: the ledger it resumes, the phase marks made
    elsewhere (`infertop phase`), and one row written per tick.

    The monitor is built with it (`Monitor(layout, recorder=...)`): it takes the ledger
    from here, applies `take_phase_marks()` before each tick and hands each snapshot to
    `write`. Nothing here reaches into the monitor.

    With `background=True` the tick's row is encoded and written by one writer thread
    (JSON + zlib + SQLite, ~10 ms a tick at 1,024 GPUs, off the TUI's event loop; zlib and
    sqlite release the GIL for their heavy parts). Each tick stays its own transaction, in
    order, and at most one tick is ever in flight: a tick waits for the previous one to be
    committed before it is handed over, so a SIGKILL loses at most one tick, as in the
    synchronous mode (in the steady state the previous tick committed long before). A
    listener that runs after the recorder then sees a tick that may not be on disk yet:
    `record` (one line a tick, printed after its commit) keeps the synchronous mode.
    """

    def __init__(self, store: SessionStore, background: bool = False):
        self.store = store
        self.error: str | None = None  # the record is stalled: why (None: writing)
        self.ticks_lost = 0  # ticks whose commit failed (a full disk), never written
        self.last_loss: str | None = None
        self.closed = False
        self._jobs: queue.Queue[TickJob | None] | None = None
        self._writer: threading.Thread | None = None
        if background:
            self._jobs = queue.Queue(maxsize=1)
            self._writer = threading.Thread(
                target=self._write_loop, name="infertop-record", daemon=True
            )
            self._writer.start()

    @classmethod
    def open(
        cls, layout: Layout, path: Path | None = None, background: bool = False, now: float | None = None
    ) -> Recorder:
        """Open (or resume) the record of `layout`'s session; a new session starts at the
        reservation start, else at `now`. Raises RecordError."""
        fresh = SessionLedger.for_layout(layout, time.time() if now is None else now)
        return cls(SessionStore.open(layout, path, fresh), background=background)

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def ledger(self) -> SessionLedger:
        return self.store.ledger

    def take_phase_marks(self) -> list[tuple[float, str]]:
        """Marks written into the record by `infertop phase` since the last call: (at, phase)."""
        return [(at, phase) for _, at, phase in self.store.take_phase_marks()]

    def write(self, snapshot: Snapshot, at: float) -> None:
        job = self.store.prepare_tick(snapshot, at)
        if self._jobs is None:
            self._commit(job)
            return
        # one tick in flight at most (see the class docstring): wait for the last one
        self._jobs.join()
        self._jobs.put_nowait(job)

    def _commit(self, job: TickJob) -> None:
        try:
            self.store.commit_tick(job)
        except sqlite3.Error as exc:
            # a full disk must not stop the monitor; the screen says the record stalled,
            # and `lost_ticks` says at the end how many ticks the record is missing
            if self.error is None:  # once per stall, not once a tick
                log.warning("session record: %s: %s (ticks are not being written)", self.store.path,
                            _describe(exc))
            self.error = f"{self.store.path}: {_describe(exc)}"
            self.ticks_lost += 1
            self.last_loss = _describe(exc)
            return
        if self.error is not None:
            log.warning("session record: %s: writing again", self.store.path)
        self.error = None

    def lost_ticks(self) -> str | None:
        """'N of M ticks were not written (why)', or None when every tick was."""
        if not self.ticks_lost:
            return None
        total = self.ticks_lost + self.store.ticks_written
        return (f"{self.store.path}: {self.ticks_lost} of {total} ticks were not written "
                f"({self.last_loss}); the record is missing them")

    def _write_loop(self) -> None:
        assert self._jobs is not None
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                self._commit(job)
            except Exception:  # anything else: log it, keep the writer alive for the next tick
                log.exception("session record writer failed")
            finally:
                self._jobs.task_done()

    def flush(self) -> None:
        """Wait until every tick handed over so far is committed (or failed)."""
        if self._jobs is not None:
            self._jobs.join()

    def close(self) -> None:
        """Write what is in flight and end the record (cleanly: a later open starts anew
        unless the layout pins the same reservation). Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        if self._jobs is not None and self._writer is not None:
            self._jobs.put(None)  # after every waiting tick: drains, then the writer ends
            self._writer.join()
            self._jobs = None
        self.store.close(ended=True)


# --------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class TickRow:
    id: int
    at: float
    phase: str
    cost_per_hour_usd: float | None
    spend_usd: Decimal | None
    idle_spend_usd: Decimal | None
    api_equivalent_usd: Decimal | None
    output_tokens: float | None
    requests_finished: float | None
    accepted_tokens_per_s: float | None
    idle_fraction: float | None


_TICK_COLUMNS = (
    "id, at, phase, cost_per_hour_usd, spend_usd, idle_spend_usd, api_equivalent_usd,"
    " output_tokens, requests_finished, accepted_tokens_per_s, idle_fraction"
)
_optional_amount = check.optional(check.amount)
_optional_count = check.optional(check.count)


def _tick_row(row: tuple[Any, ...]) -> TickRow:
    """One row of `ticks`, every column checked; BadValue names the column."""
    return TickRow(
        int(row[0]),
        check.time_s(row[1], "at"),
        check.choice(row[2], "phase", PHASES),
        check.optional(check.usd_per_hour)(row[3], "cost_per_hour_usd"),
        _optional_amount(row[4], "spend_usd"),
        _optional_amount(row[5], "idle_spend_usd"),
        _optional_amount(row[6], "api_equivalent_usd"),
        _optional_count(row[7], "output_tokens"),
        _optional_count(row[8], "requests_finished"),
        check.optional(check.rate_per_s)(row[9], "accepted_tokens_per_s"),
        check.optional(check.fraction)(row[10], "idle_fraction"),
    )


def _summary(noun: str, faults: list[str]) -> str:
    """One problem line for many faults of one kind: how many, and the first."""
    if len(faults) == 1:
        return faults[0]
    return f"{len(faults):,} {noun} unreadable, the first: {faults[0]}"


# a record whose ledger is damaged falls back on its last snapshots; a bomb in each of a
# million ticks must not keep `report` inflating for hours
_FALLBACK_SNAPSHOTS = 16


@dataclass
class Recording:
    """A record read back, tolerantly: whatever is readable, and what was not (`problems`).

    Every value is checked as it is read (`monitor.record.checks`): a crafted record gives
    problems, never a runaway, an overflow or a NaN in the report.
    """

    path: Path
    conn: sqlite3.Connection
    meta: dict[str, str] = field(default_factory=dict)
    layout: Layout | None = None
    ticks: list[TickRow] = field(default_factory=list)
    ledger: SessionLedger | None = None
    problems: list[str] = field(default_factory=list)
    unreadable_snapshots: set[int] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path) -> Recording:
        """Raises RecordError only when nothing at all can be read."""
        if not path.exists():
            raise RecordError(f"{path}: no such file")
        if path.is_dir():
            raise RecordError(f"{path}: is a directory, not a session record")
        try:
            conn = reading(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S))
            # SQLite refuses a file shorter than its header says (a truncated copy) unless
            # the schema is "writable"; on a read-only connection that only lets us salvage
            conn.execute("PRAGMA writable_schema=ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise RecordError(f"{path}: not a readable session record ({_describe(exc)})") from None
        rec = cls(path, conn)
        rec._load_meta()
        rec._load_ledger()  # before the ticks: its start and last tick bound their times
        rec._load_ticks()
        return rec

    def _problem(self, what: str, exc: Exception) -> None:
        detail = _describe(exc) if isinstance(exc, sqlite3.Error) else str(exc).splitlines()[0]
        self.problems.append(f"{what}: {detail}")

    def _load_meta(self) -> None:
        try:
            self.meta, problems = read_meta(self.conn)
        except sqlite3.Error as exc:
            self._problem("metadata unreadable", exc)
            return
        self.problems += problems
        if self.meta.get("schema") != str(SCHEMA_VERSION):
            if not problems:
                self.problems.append("not an infertop session record (no schema)")
            return
        try:
            self.layout = Layout.model_validate_json(self.meta["layout"])
        except (KeyError, ValueError) as exc:
            self._problem("layout unreadable", exc)

    def _session_start(self) -> float | None:
        if self.ledger is not None:
            return self.ledger.started_at
        started = self.meta.get("started_at")
        return None if started is None else float(started)

    def _load_ticks(self) -> None:
        # Walk forwards until the first damaged page, then backwards from the end, so that
        # a hole in the middle of a recording still leaves both of its sides readable.
        rows: dict[int, TickRow] = {}
        faults: dict[int, str] = {}
        for order in ("ASC", "DESC"):
            try:
                cursor = self.conn.execute(f"SELECT {_TICK_COLUMNS} FROM ticks ORDER BY id {order}")  # noqa: S608 - fixed text
                for raw in cursor:
                    tick_id = int(raw[0])
                    if tick_id in rows or tick_id in faults:
                        break
                    if len(rows) + len(faults) >= check.MAX_TICKS:
                        self.problems.append(f"more than {check.MAX_TICKS:,} ticks: the rest not read")
                        break
                    try:
                        rows[tick_id] = _tick_row(raw)
                    except check.BadValue as exc:
                        faults[tick_id] = f"tick {tick_id}: {exc}"
            except sqlite3.Error as exc:
                self._problem(f"ticks unreadable ({order.lower()} scan stopped after {len(rows)})", exc)
        self.ticks = self._in_session([rows[i] for i in sorted(rows)], faults)
        if faults:
            self.problems.append(_summary("ticks", [faults[i] for i in sorted(faults)]))

    def _in_session(self, ticks: list[TickRow], faults: dict[int, str]) -> list[TickRow]:
        """The ticks in time order within the session; the others go to `faults`.

        A tick lies within MAX_SESSION_S of the reservation start, not after the ledger's
        last tick (written in the same transaction as the last one), and not before the
        tick kept before it.
        """
        start = self._session_start()
        if start is None and ticks:
            start = ticks[0].at
        last_at = self.ledger.last_at if self.ledger is not None else None
        kept: list[TickRow] = []
        for tick in ticks:
            try:
                check.near(tick.at, start if start is not None else tick.at, "at")
                if last_at is not None and tick.at > last_at + 1e-3:
                    raise check.BadValue(f"at {tick.at:.3f} is after the ledger's last tick ({last_at:.3f})")
                if kept and tick.at < kept[-1].at:
                    before = kept[-1]
                    raise check.BadValue(f"at {tick.at:.3f} is before tick {before.id}'s ({before.at:.3f})")
            except check.BadValue as exc:
                faults[tick.id] = f"tick {tick.id}: {exc}"
                continue
            kept.append(tick)
        return kept

    def _load_ledger(self) -> None:
        try:
            state = read_ledger_state(self.conn)
            prices = self.layout.pricing.api if self.layout else None
            self.ledger = (
                SessionLedger.from_state(state, prices) if prices else SessionLedger.from_state(state)
            )
        except (sqlite3.Error, ValueError) as exc:
            self._problem("ledger unreadable", exc)

    def snapshot(self, tick_id: int) -> Snapshot | None:
        """The recorded Snapshot of one tick; None when that part of the file is damaged."""
        try:
            row = self.conn.execute("SELECT snapshot FROM ticks WHERE id = ?", (tick_id,)).fetchone()
            if row is None:
                return None
            ratio = self.layout.thresholds.link_rate_ratio if self.layout else Thresholds().link_rate_ratio
            return with_link_judgments(decode_snapshot(row[0]), ratio)
        except (sqlite3.Error, zlib.error, ValueError) as exc:
            if tick_id not in self.unreadable_snapshots:  # a replay may come back to it
                self.unreadable_snapshots.add(tick_id)
                self._problem(f"tick {tick_id} snapshot unreadable", exc)
            return None

    def final_session(self) -> SessionView | None:
        """The session figures as the live session last showed them.

        The ledger row is written in the same transaction as each tick, so it is the live
        total; when it is damaged, the last readable tick's snapshot stands in.
        """
        if self.ledger is not None and self.ledger.last_at is not None:
            view = self.ledger.view(self.ledger.last_at, str(self.path))
            # the live throughput point is no ledger figure: the last snapshot's stands
            last = self._last_snapshot()
            if last is None:
                return view
            return view.model_copy(update={f: getattr(last.session, f) for f in LIVE_POINT_FIELDS})
        last = self._last_snapshot()
        return None if last is None else last.session

    def _last_snapshot(self) -> Snapshot | None:
        for tick in list(reversed(self.ticks))[:_FALLBACK_SNAPSHOTS]:
            snap = self.snapshot(tick.id)
            if snap is not None:
                return snap
        return None

    def close(self) -> None:
        self.conn.close()
