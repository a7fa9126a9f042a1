"""The report's timeline: every event the recorded snapshots carried, once each.

Each snapshot carries the latest events (`Snapshot.timeline`), so the union over the
report's sampled snapshots is the session's timeline; an event is one (time, kind, node,
detail). A record made before the timeline existed has none in its snapshots: its phase
changes, which every tick row keeps, stand in, so old records still report one.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Sequence

from infertop.collectors.safe_text import inert_text
from infertop.monitor.record.recording import TickRow
from infertop.monitor.snapshot import Snapshot, TimelineEventView

MAX_TIMELINE_LINES = 200  # in report.md; timeline.csv has every event
TIMELINE_COLUMNS = ("at_utc", "kind", "node", "detail")


def recorded_timeline(snapshots: Sequence[Snapshot], ticks: Sequence[TickRow]) -> list[TimelineEventView]:
    """The session's events in time order; phase changes from the ticks for an old record."""
    seen: dict[tuple[float, str, str | None, str], TimelineEventView] = {}
    for snap in snapshots:
        for event in snap.timeline:
            seen.setdefault((round(event.at, 3), event.kind, event.node, event.detail), event)
    if seen:
        return sorted(seen.values(), key=lambda e: (e.at, e.node or "", e.kind))
    out: list[TimelineEventView] = []
    if ticks:
        out.append(TimelineEventView(at=ticks[0].at, kind="phase", detail=f"phase {ticks[0].phase}"))
    for before, after in itertools.pairwise(ticks):
        if after.phase != before.phase:
            out.append(TimelineEventView(at=after.at, kind="phase", detail=f"phase {after.phase}"))
    return out


def _when(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def timeline_rows(events: Sequence[TimelineEventView]) -> list[tuple[str, str, str, str]]:
    return [
        (dt.datetime.fromtimestamp(e.at, dt.UTC).isoformat(), e.kind, e.node or "", inert_text(e.detail, 300))
        for e in events
    ]


def _cell(text: str) -> str:
    # one table cell: inert, and no pipe to split the row
    return inert_text(text, 300).replace("|", "\\|")


def timeline_markdown(events: Sequence[TimelineEventView]) -> list[str]:
    lines = ["## Timeline", ""]
    if not events:
        return [*lines, "Nothing was marked on the timeline.", ""]
    lines += ["| time (UTC) | event | node | detail |", "|---|---|---|---|"]
    lines += [
        f"| {_when(e.at)} | {_cell(e.kind)} | {_cell(e.node or 'cluster')} | {_cell(e.detail)} |"
        for e in events[:MAX_TIMELINE_LINES]
    ]
    if len(events) > MAX_TIMELINE_LINES:
        lines.append(f"\n{len(events) - MAX_TIMELINE_LINES} later events in `timeline.csv`.")
    return [*lines, ""]
