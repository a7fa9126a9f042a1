"""The session record: one SQLite file (WAL) per session, written tick by tick (the writer;
the file's format and snapshot codec: codec.py; reading it back: recording.py; where it lives
and its lock: monitor/state.py).

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
import json
import logging
import queue
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infertop.collectors.safe_text import redact_url
from infertop.layouts.model import Layout
from infertop.monitor.evaluation.ledger import PHASES, SessionLedger, energy_usd_per_kwh, reservation_end
from infertop.monitor.record import checks as check
from infertop.monitor.record.codec import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    RecordError,
    describe,
    encode_snapshot,
    read_ledger_state,
    read_meta,
    reading,
)

# imported from here by infertop/cli (records, ps, serve, record, report): the state names now live in
# monitor.state, the reader in monitor.record.recording
from infertop.monitor.record.recording import Recording as Recording
from infertop.monitor.snapshot import Snapshot
from infertop.monitor.state import PRIVATE_FILE_MODE as PRIVATE_FILE_MODE
from infertop.monitor.state import (
    LockBusy,
    StateLock,
    command_line,
    create_private_file,
    layout_key,
    private_dir,
    state_dir,
    tighten,
)

log = logging.getLogger(__name__)


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




def lock_record(record: Path) -> StateLock:
    """One writer per record: the lock on RECORD.lock, held while writing; RecordError
    naming the holder when it is taken (two `record` processes on one layout both wrote
    ticks: duplicates, spend going back)."""
    path = Path(f"{record}.lock")
    try:
        return StateLock.hold(path, command_line())
    except LockBusy as busy:
        raise RecordError(f"record {record} is being written by {busy}; attach or stop it") from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot lock the session record: {exc.strerror or exc}") from None


def default_record_path(layout: Layout) -> Path:
    return state_dir() / f"{layout_key(layout)}.sqlite"


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")


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



def _unresumable(path: Path, why: str) -> RecordError:
    return RecordError(f"{path}: cannot resume this session record ({why}); "
                       "move it away or pass --record FILE")




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
        self.lock: StateLock | None = None  # set by `open`, released by `close`

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
            private_dir(path.parent)
        except OSError as exc:
            raise RecordError(f"{path.parent}: cannot create the state directory: {exc}") from None
        lock = lock_record(path)  # before reading: a second writer must not even archive
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
                tighten(path, ("", "-wal", "-shm"))
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
            raise _unresumable(path, describe(exc)) from None
        return meta, state

    @classmethod
    def _resume(
        cls, path: Path, layout: Layout, meta: dict[str, str], ledger: SessionLedger
    ) -> SessionStore:
        # the layout may have changed its budget or task count since; its word is the latest
        ledger.budget_usd = layout.session.budget_usd
        ledger.acceptable_tasks = layout.session.acceptable_tasks
        ledger.ends_at = reservation_end(layout, ledger.started_at)
        ledger.billed_after_end = layout.session.billed_after_end
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
            create_private_file(path)
            conn = _connect(path)
            conn.executescript(_DDL)
        except OSError as exc:
            raise RecordError(f"{path}: cannot create the session record ({exc.strerror or exc})") from None
        except sqlite3.Error as exc:
            raise RecordError(f"{path}: cannot create the session record ({describe(exc)})") from None
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
        raise RecordError(f"{path}: cannot mark the phase ({describe(exc)})") from None


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
                            describe(exc))
            self.error = f"{self.store.path}: {describe(exc)}"
            self.ticks_lost += 1
            self.last_loss = describe(exc)
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
