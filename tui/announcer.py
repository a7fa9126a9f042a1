"""Announcing verdicts as they start: one announcer, owned by the app and fed every frame
whatever screen is on top, so a verdict that starts while the operator reads a node
screen is told at once, and never twice.

Told where no figure sits: a line in the header of the overview and in the title line of
the other screens (the app hands it to them through `FrameState.news`), never a toast
over the node table. A mass event (grouped by the monitor, `evaluation.mass_events`) is
one item; what starts while the line is up joins it ("3 new: …"); the line goes
`NEWS_SHOWN_S` after the last start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

from infertop.monitor.evaluation.conditions import SEVERITY_RANK
from infertop.monitor.evaluation.verdicts import hunt_order
from infertop.monitor.format import inert_text
from infertop.monitor.snapshot import NodeView, VerdictGroupView, VerdictView

Key = tuple[str, str]
# a burst of new verdicts (a switch dies, a whole pool goes idle) is one line, not a
# wall: this many are named in it, the rest counted
MAX_NAMED = 3
NEWS_SHOWN_S = 15.0  # the line stays this long after the last verdict started
NEWS_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


@dataclass(frozen=True)
class News:
    """One thing to tell: a verdict on a node, or a mass event."""

    title: str  # "decode-04 link-starved", "6 nodes unreachable"
    severity: str
    count: int  # verdicts it stands for


class VerdictAnnouncer:
    """Tells when a verdict starts: a (node, kind) that the previous frame did not have.

    The first frame sets the baseline silently: verdicts already standing when the
    operator opens the screen are listed, not announced.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._seen: set[Key] | None = None
        self._groups_told: set[str] = set()
        self._news: list[News] = []
        self._last_news_at: float | None = None
        self._clock = clock

    def observe(
        self, nodes: Sequence[NodeView], groups: Sequence[VerdictGroupView] = ()
    ) -> list[tuple[NodeView, VerdictView]]:
        """Take one frame; returns the (node, verdict) pairs that started in it."""
        pairs = hunt_order(nodes)
        seen, self._seen = self._seen, {(n.name, v.kind) for n, v in pairs}
        started = [] if seen is None else [(n, v) for n, v in pairs if (n.name, v.kind) not in seen]
        grouped = {(name, g.kind): g for g in groups for name in g.nodes}
        if seen is None:
            self._groups_told = {g.key for g in groups}
        news: list[News] = []
        for node, verdict in started:
            group = grouped.get((node.name, verdict.kind))
            if group is None:
                news.append(News(f"{node.name} {verdict.kind}", verdict.severity, 1))
            elif group.key not in self._groups_told:
                # told once, with its size as of now; members that join it later are in
                # the hunt list's row, not in new lines
                self._groups_told.add(group.key)
                news.append(News(f"{len(group.nodes)} nodes {group.kind}", group.severity, len(group.nodes)))
        self._groups_told &= {g.key for g in groups}
        if news:
            now = self._clock()
            if self._last_news_at is None or now - self._last_news_at >= NEWS_SHOWN_S:
                self._news = []  # the last line is gone: a new one
            self._news += news
            self._last_news_at = now
        return started

    def line(self) -> Text | None:
        """The news line, "new: decode-04 link-starved" / "3 new: …, …"; None when there
        is nothing new (or it is older than `NEWS_SHOWN_S`). Names are made inert."""
        if not self._news or self._last_news_at is None:
            return None
        if self._clock() - self._last_news_at >= NEWS_SHOWN_S:
            return None
        worst = min((n.severity for n in self._news), key=lambda s: SEVERITY_RANK.get(s, len(SEVERITY_RANK)))
        total = sum(n.count for n in self._news)
        named = ", ".join(n.title for n in self._news[:MAX_NAMED])
        more = ", …" if len(self._news) > MAX_NAMED else ""
        head = "new: " if total == 1 or (len(self._news) == 1) else f"{total} new: "
        return Text(inert_text(f"{head}{named}{more}", 200), NEWS_STYLE.get(worst, "yellow"))
