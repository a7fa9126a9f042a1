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
import hashlib
import json
import logging
import os
import queue
import re
import sqlite3
import stat
import threading
import time
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors.safe_text import redact_url
from infertop.session import SessionLedger
from infertop.view import SessionView, Snapshot
from layouts.model import Layout

if TYPE_CHECKING:
    from infertop.runtime import Monitor

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


def state_dir() -> Path:
    """$INFERTOP_STATE_DIR, else $XDG_STATE_HOME/infertop, else ~/.local/state/infertop."""
    explicit = os.environ.get("INFERTOP_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "infertop"


def layout_key(layout: Layout) -> str:
    """A file-name-safe name for a layout's session: its cluster name and where it lives."""
    identity = str(Path(layout.source_path).resolve()) if layout.source_path else "<built-in>"
    digest = hashlib.sha256(f"{identity}\0{layout.cluster.name}".encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", layout.cluster.name).strip("-.")[:40] or "cluster"
    return f"{slug}-{digest}"


def default_record_path(layout: Layout) -> Path:
    return state_dir() / f"{layout_key(layout)}.sqlite"


PRIVATE_DIR_MODE = 0o700
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


def encode_snapshot(snapshot: Snapshot) -> bytes:
    # pydantic's own JSON writer: the same compact text as json.dumps of the dumped dict,
    # 3x faster (128 nodes × 8 GPUs: ~4 ms instead of ~13 ms a tick; benchmarks/bench_tui)
    return zlib.compress(snapshot.model_dump_json(by_alias=True).encode(), 6)


def decode_snapshot(blob: bytes) -> Snapshot:
    return Snapshot.model_validate(json.loads(zlib.decompress(blob)))


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
        if path.exists() and path.stat().st_size > 0:
            meta, state = cls._read_existing(path)
            pinned = layout.session.reservation_start
            same_start = pinned is not None and abs(pinned.timestamp() - state["started_at"]) < 1e-6
            if "ended_at" not in meta or same_start:
                _tighten(path)
                return cls._resume(path, layout, meta, state)
            cls._archive(path, meta)
        return cls._create(path, layout, fresh_ledger)

    @staticmethod
    def _read_existing(path: Path) -> tuple[dict[str, str], dict[str, Any]]:
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
            try:
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                row = conn.execute("SELECT state FROM ledger WHERE id = 1").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise RecordError(
                f"{path}: cannot resume this session record ({_describe(exc)}); "
                "move it away or pass --record FILE"
            ) from None
        if meta.get("schema") != str(SCHEMA_VERSION) or row is None:
            raise RecordError(f"{path}: not an infertop session record (schema {meta.get('schema')!r})")
        try:
            state = json.loads(row[0])
        except ValueError:
            raise RecordError(f"{path}: the ledger state is not valid JSON") from None
        return meta, state

    @classmethod
    def _resume(
        cls, path: Path, layout: Layout, meta: dict[str, str], state: dict[str, Any]
    ) -> SessionStore:
        try:
            ledger = SessionLedger.from_state(state, prices=layout.pricing.api)
        except ValueError as exc:
            raise RecordError(f"{path}: {exc}") from None
        # the layout may have changed its budget or task count since; its word is the latest
        ledger.budget_usd = layout.session.budget_usd
        ledger.acceptable_tasks = layout.session.acceptable_tasks
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
            "SELECT id, at, phase FROM phase_marks WHERE applied = 0 ORDER BY id"
        ).fetchall()
        # a mark already handed over stays unapplied in the file until its tick commits
        # (later, when a background writer is behind): never hand it to the ledger twice
        marks = [(int(i), float(at), str(phase)) for i, at, phase in rows if int(i) not in self._seen_marks]
        self._seen_marks.update(i for i, _, _ in marks)
        self._taken_marks.extend(i for i, _, _ in marks)
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


def add_phase_mark(path: Path, phase: str, at: float, origin: str = "cli") -> None:
    """Ask the session writing `path` to switch phase at `at` (applied at its next tick)."""
    if not path.exists():
        raise RecordError(f"{path}: no session record here (is infertop running on this layout?)")
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
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
    """Hooks a `SessionStore` into a `Monitor`: resume its ledger, write every tick.

    With `background=True` the tick's row is encoded and written by one writer thread
    (JSON + zlib + SQLite, ~10 ms a tick at 1,024 GPUs, off the TUI's event loop; zlib and
    sqlite release the GIL for their heavy parts). Each tick stays its own transaction, in
    order, and at most one tick is ever in flight: a tick waits for the previous one to be
    committed before it is handed over, so a SIGKILL loses at most one tick, as in the
    synchronous mode (in the steady state the previous tick committed long before). A
    listener that runs after the recorder then sees a tick that may not be on disk yet:
    `record` (one line a tick, printed after its commit) keeps the synchronous mode.
    """

    def __init__(self, monitor: Monitor, store: SessionStore, background: bool = False):
        self.monitor = monitor
        self.store = store
        self.error: str | None = None
        self._jobs: queue.Queue[TickJob | None] | None = None
        self._writer: threading.Thread | None = None
        if background:
            self._jobs = queue.Queue(maxsize=1)
            self._writer = threading.Thread(
                target=self._write_loop, name="infertop-record", daemon=True
            )
            self._writer.start()

    @classmethod
    def attach(cls, monitor: Monitor, path: Path | None = None, background: bool = False) -> Recorder:
        """Open (or resume) the record before the monitor starts. Raises RecordError."""
        store = SessionStore.open(monitor.layout, path, monitor.ledger)
        monitor.ledger = store.ledger
        monitor.record_path = str(store.path)
        recorder = cls(monitor, store, background=background)
        monitor.before_tick.append(recorder._apply_marks)
        monitor.listeners.append(recorder._write)
        return recorder

    @property
    def path(self) -> Path:
        return self.store.path

    def _apply_marks(self, now: float) -> None:
        for _, at, phase in self.store.take_phase_marks():
            try:
                self.monitor.ledger.mark_phase(phase, at)
            except ValueError as exc:  # a bad name from an old CLI: say so, keep going
                log.warning("phase mark ignored: %s", exc)

    def _write(self, snapshot: Snapshot) -> None:
        at = self.monitor.ledger.last_at
        job = self.store.prepare_tick(snapshot, at if at is not None else time.time())
        if self._jobs is None:
            self._commit(job)
            return
        # one tick in flight at most (see the class docstring): wait for the last one
        self._jobs.join()
        self._jobs.put_nowait(job)

    def _commit(self, job: TickJob) -> None:
        try:
            self.store.commit_tick(job)
            self.error = None
        except sqlite3.Error as exc:
            # a full disk must not stop the monitor; the screen says the record stalled
            self.error = f"{self.store.path}: {_describe(exc)}"
            log.warning("session record: %s", self.error)

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
        if self._write in self.monitor.listeners:
            self.monitor.listeners.remove(self._write)
        if self._apply_marks in self.monitor.before_tick:
            self.monitor.before_tick.remove(self._apply_marks)
        if self._jobs is not None and self._writer is not None:
            self._jobs.put(None)  # after every waiting tick: drains, then the writer ends
            self._writer.join()
            self._jobs = None
        self.store.close(ended=True)


# --------------------------------------------------------------------- reading


@dataclass(frozen=True)
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


def _dec(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _tick_row(row: tuple[Any, ...]) -> TickRow:
    return TickRow(
        int(row[0]), float(row[1]), str(row[2]), row[3], _dec(row[4]), _dec(row[5]), _dec(row[6]),
        row[7], row[8], row[9], row[10],
    )


@dataclass
class Recording:
    """A record read back, tolerantly: whatever is readable, and what was not (`problems`)."""

    path: Path
    conn: sqlite3.Connection
    meta: dict[str, str] = field(default_factory=dict)
    layout: Layout | None = None
    ticks: list[TickRow] = field(default_factory=list)
    ledger: SessionLedger | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Recording:
        """Raises RecordError only when nothing at all can be read."""
        if not path.exists():
            raise RecordError(f"{path}: no such file")
        if path.is_dir():
            raise RecordError(f"{path}: is a directory, not a session record")
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            # SQLite refuses a file shorter than its header says (a truncated copy) unless
            # the schema is "writable"; on a read-only connection that only lets us salvage
            conn.execute("PRAGMA writable_schema=ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise RecordError(f"{path}: not a readable session record ({_describe(exc)})") from None
        rec = cls(path, conn)
        rec._load_meta()
        rec._load_ticks()
        rec._load_ledger()
        return rec

    def _problem(self, what: str, exc: Exception) -> None:
        detail = _describe(exc) if isinstance(exc, sqlite3.Error) else str(exc).splitlines()[0]
        self.problems.append(f"{what}: {detail}")

    def _load_meta(self) -> None:
        try:
            self.meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error as exc:
            self._problem("metadata unreadable", exc)
            return
        if self.meta.get("schema") != str(SCHEMA_VERSION):
            self.problems.append(f"not an infertop session record (schema {self.meta.get('schema')!r})")
            return
        try:
            self.layout = Layout.model_validate_json(self.meta["layout"])
        except (KeyError, ValueError) as exc:
            self._problem("layout unreadable", exc)

    def _load_ticks(self) -> None:
        # Walk forwards until the first damaged page, then backwards from the end, so that
        # a hole in the middle of a recording still leaves both of its sides readable.
        rows: dict[int, TickRow] = {}
        for order in ("ASC", "DESC"):
            try:
                cursor = self.conn.execute(f"SELECT {_TICK_COLUMNS} FROM ticks ORDER BY id {order}")  # noqa: S608 - fixed text
                for raw in cursor:
                    tick = _tick_row(raw)
                    if tick.id in rows:
                        break
                    rows[tick.id] = tick
            except (sqlite3.Error, ArithmeticError, ValueError, TypeError) as exc:
                self._problem(f"ticks unreadable ({order.lower()} scan stopped after {len(rows)})", exc)
        self.ticks = [rows[i] for i in sorted(rows)]

    def _load_ledger(self) -> None:
        try:
            row = self.conn.execute("SELECT state FROM ledger WHERE id = 1").fetchone()
            if row is None:
                raise ValueError("no ledger row")
            prices = self.layout.pricing.api if self.layout else None
            state = json.loads(row[0])
            self.ledger = (
                SessionLedger.from_state(state, prices) if prices else SessionLedger.from_state(state)
            )
        except (sqlite3.Error, ValueError) as exc:
            self._problem("ledger unreadable", exc)

    def snapshot(self, tick_id: int) -> Snapshot | None:
        """The recorded Snapshot of one tick; None when that part of the file is damaged."""
        try:
            row = self.conn.execute("SELECT snapshot FROM ticks WHERE id = ?", (tick_id,)).fetchone()
            return None if row is None else decode_snapshot(row[0])
        except (sqlite3.Error, zlib.error, ValueError) as exc:
            self._problem(f"tick {tick_id} snapshot unreadable", exc)
            return None

    def final_session(self) -> SessionView | None:
        """The session figures as the live session last showed them.

        The ledger row is written in the same transaction as each tick, so it is the live
        total; when it is damaged, the last readable tick's snapshot stands in.
        """
        if self.ledger is not None and self.ledger.last_at is not None:
            return self.ledger.view(self.ledger.last_at, str(self.path))
        for tick in reversed(self.ticks):
            snap = self.snapshot(tick.id)
            if snap is not None:
                return snap.session
        return None

    def close(self) -> None:
        self.conn.close()
