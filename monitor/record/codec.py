"""The record file's format, shared by its writer (store.py) and its reader (recording.py):
the schema version, the snapshot codec (zlib-compressed Snapshot JSON) and the checked reads
of meta and ledger rows (every value read from a record is bounded and checked: a record
may come from anywhere).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from typing import Any

import pydantic_core

from infertop.monitor.evaluation.scoreboard import with_live_point
from infertop.monitor.record import checks as check
from infertop.monitor.snapshot import Snapshot, snapshot_json

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0


class RecordError(ValueError):
    """A record that cannot be used. `str()` is the one-line message for the user."""


def describe(exc: sqlite3.Error) -> str:
    return str(exc) or type(exc).__name__


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
