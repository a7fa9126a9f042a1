"""A session record read back (replay, report, timeline): tolerantly, every value checked.

Whatever is readable is used, and what was not is said (`Recording.problems`); the writer
is monitor/record/store.py, the file's format monitor/record/codec.py.
"""

from __future__ import annotations

import sqlite3
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from infertop.layouts.model import Layout, Thresholds
from infertop.monitor.evaluation.ledger import PHASES, SPAN_GOODPUT_FIELDS, SessionLedger
from infertop.monitor.evaluation.link_summary import with_link_judgments
from infertop.monitor.evaluation.scoreboard import LIVE_POINT_FIELDS
from infertop.monitor.record import checks as check
from infertop.monitor.record.codec import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    RecordError,
    decode_snapshot,
    describe,
    read_ledger_state,
    read_meta,
    reading,
)
from infertop.monitor.snapshot import SessionView, Snapshot


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
            raise RecordError(f"{path}: not a readable session record ({describe(exc)})") from None
        rec = cls(path, conn)
        rec._load_meta()
        rec._load_ledger()  # before the ticks: its start and last tick bound their times
        rec._load_ticks()
        return rec

    def _problem(self, what: str, exc: Exception) -> None:
        detail = describe(exc) if isinstance(exc, sqlite3.Error) else str(exc).splitlines()[0]
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
            return view.model_copy(update={f: getattr(last.session, f)
                                           for f in (*LIVE_POINT_FIELDS, *SPAN_GOODPUT_FIELDS)})
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
