"""The header: cluster name, session clock, running spend, $/h, and loud warnings."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text

from infertop.monitor.evaluation.judging import judging_note
from infertop.monitor.evaluation.shared_gaps import KIND_LABELS
from infertop.monitor.format import detail_forms, fit_forms, fmt_duration, fmt_usd
from infertop.monitor.snapshot import Snapshot
from infertop.tui.columns import TROUBLE, WARN
from infertop.tui.text import inert
from infertop.tui.text_lines import TextLines

INSECURE_SSH_WARNING = "⚠ SSH host-key checking is OFF for this layout (ssh.insecure_no_host_key_check)"


def monitor_lag_text(snapshot: Snapshot) -> str | None:
    """The monitor's own warning, as it composed it (monitor/health.py)."""
    health = snapshot.monitor
    if health is None or not health.lagging:
        return None
    text = f"⚠ monitor lagging: {health.reason or 'behind'}"
    if health.suggestion:
        text += f" — {health.suggestion}"
    return inert(text, max_len=200).plain


def header_text(
    snapshot: Snapshot | None,
    *,
    paused: bool = False,
    filter_text: str = "",
    shown: int | None = None,
    sort_label: str = "layout",
    alerts: str | None = None,
    hidden: Sequence[str] = (),
    news: Text | None = None,
    width: int | None = None,
) -> Text:
    """`hidden`: the node table's columns left out at this width (said, with the key
    that shows them, never silently gone). `width`: the header's, which items written
    in several forms (the detail read) fit by the one rule."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("infertop", "bold")
    if snapshot is None:
        out.append("  waiting for the first samples…", "grey50")
        return out
    s = snapshot.session
    out.append(" ▸ ")
    out.append(inert(snapshot.cluster.name, "bold", max_len=40))
    # early in the line: a narrow terminal cuts the end, and a muted bell must show
    if alerts == "muted":
        out.append("   ")
        out.append(" BELL MUTED ", "reverse yellow")
    elif alerts == "on":
        out.append("   bell on", "grey70")
    out.append("   session ")
    out.append(fmt_duration(s.elapsed_s), "bold")
    out.append("   spend ")
    out.append(fmt_usd(s.spend_usd), "bold")
    out.append(f"   {fmt_usd(s.cost_per_hour_usd)}/h")
    if s.idle_spend_usd is not None:  # an essential: shown even at $0.00
        out.append(f"   idle {fmt_usd(s.idle_spend_usd)}")
    out.append(f"   phase {inert(s.phase, max_len=16).plain}")
    if s.budget_usd is not None:
        style = {"100%": TROUBLE, "80%": WARN}.get(s.budget_alert or "", "")
        out.append(f"   budget {s.budget_label or fmt_usd(s.budget_usd, 0)}", style)
    total = len(snapshot.nodes)
    # how many the layout watches; a filter says how many of them it shows ("9/128" read
    # as nine nodes answering)
    if shown is not None and (shown != total or filter_text):
        out.append(f"   showing {shown} of {total} nodes", "grey70")
    else:
        out.append(f"   nodes {total}", "grey70")
    judging = judging_note(snapshot.cluster, total)
    if judging:  # warm-up: no verdict yet means not judged yet, not all clear
        out.append(f"   {judging}", WARN)
    if news is not None:  # verdicts that just started: told here, never over the table
        out.append("   ")
        out.append_text(news)
    blind = snapshot.cluster.blind_nodes
    if blind:
        # unknown is never healthy: say how much of the cluster cannot be seen
        out.append(f"   blind on {blind} node{'s' if blind != 1 else ''}", WARN)
    for spot in snapshot.cluster.shared_blind_spots:
        # what every node misses alike: said once (the hunt list has the fix)
        labels = ", ".join(dict.fromkeys(KIND_LABELS.get(k, k) for k in spot.kinds))
        count = f"{spot.nodes} node{'s' if spot.nodes != 1 else ''}"
        out.append(f"   fleet-wide blind on {inert(labels, max_len=80).plain} ({count})", WARN)
    if filter_text:
        out.append("   filter ", "grey70")
        out.append(inert(filter_text, max_len=40).plain, "bold cyan")
    out.append(f"   sort {sort_label}", "grey70")
    if hidden:
        out.append(f"   {len(hidden)} column{'s' if len(hidden) != 1 else ''} hidden (w: all)", "grey70")
    detail = snapshot.detail
    if detail is not None and detail.every_s is not None:  # reading only some nodes' detail a tick
        forms = detail_forms(detail.nodes, detail.of, detail.every_s)
        said = fit_forms(forms, width) if width is not None else forms[0]
        if said is not None:
            out.append(f"   {said}", "grey70")
    if paused:
        out.append("   ")
        out.append(" PAUSED ", "reverse yellow")
    lag = monitor_lag_text(snapshot)
    if lag:
        out.append("\n")
        out.append(lag, WARN)
    for backend in snapshot.backends:  # the metrics backend's own delay, said once
        if backend.note is not None:
            out.append("\n")
            out.append(f"⚠ {inert(backend.note, max_len=200).plain}", WARN)
    if snapshot.cluster.insecure_ssh:
        out.append("\n")
        out.append(INSECURE_SSH_WARNING, TROUBLE)
    return out


SEPARATOR = "   "  # between the header's items; a wrapped line breaks only here


def wrap_items(text: Text, width: int) -> Text:
    """The header folded to `width`: items (split at `SEPARATOR`) are never cut, an item
    that does not fit on a line starts the next one. So a narrow terminal shows every
    item (idle spend, phase, node count…) on two or three lines instead of losing the
    ones at the end."""
    if width <= 0:
        return text
    out = Text(no_wrap=True, overflow="ellipsis")
    for n, line in enumerate(text.split("\n", allow_blank=True)):
        if n:
            out.append("\n")
        plain = line.plain
        cuts, start = [], 0
        while (at := plain.find(SEPARATOR, start)) != -1:
            cuts += [at, at + len(SEPARATOR)]
            start = at + len(SEPARATOR)
            while plain.startswith(" ", start):  # a longer run of spaces is one separator
                start += 1
                cuts[-1] = start
        pieces = line.divide(cuts)
        items = [p for i, p in enumerate(pieces) if i % 2 == 0 and p.plain]
        used = 0
        for item in items:
            if item.cell_len > width:  # a long warning: folded here, so every line is counted
                if used:
                    out.append("\n")
                folded = _fold_words(item, width)
                out.append_text(Text("\n").join(folded))
                used = folded[-1].cell_len
                continue
            if used and used + len(SEPARATOR) + item.cell_len > width:
                out.append("\n")
                used = 0
            elif used:
                out.append(SEPARATOR)
                used += len(SEPARATOR)
            out.append_text(item)
            used += item.cell_len
    return out


# A header that grew (the monitor's lag warning, a wrapped item) keeps its height this long
# after it could shrink: a warning that comes and goes every few seconds must not make the
# node table below jump up and down (nor lay out the whole screen each time, ~20 ms at
# 128 nodes).
HEIGHT_HOLD_S = 30.0


def _fold_words(item: Text, width: int) -> list[Text]:
    """One item longer than `width`, as lines of at most `width` cells broken at spaces (a
    word longer than a line is cut): the header counts its lines to size itself, so a
    warning Textual wrapped on its own would lose its last lines (its fix) when it grew."""
    lines: list[Text] = []
    rest = item
    while rest.cell_len > width:
        plain = rest.plain
        fit = _chars_within(plain, width)
        cut = plain.rfind(" ", 0, fit + 1)
        if cut <= 0:
            cut = max(fit, 1)  # a wide character wider than the line still moves on
        head, tail = rest.divide([cut])
        lines.append(head)
        rest = tail
        if rest.plain.startswith(" "):
            rest = rest[1:]
    lines.append(rest)
    return lines


def _chars_within(plain: str, width: int) -> int:
    """How many of `plain`'s first characters fit in `width` cells (a CJK name or a wide
    symbol takes two cells: counting characters would fold it past the screen's edge)."""
    low, high = 0, len(plain)
    while low < high:  # the longest prefix that fits: cell widths only grow with length
        mid = (low + high + 1) // 2
        if Text(plain[:mid]).cell_len <= width:
            low = mid
        else:
            high = mid - 1
    return low


class HeaderBar(TextLines):
    """Drawn line by line (`TextLines`): the clock and the spend change every second, the
    lines under them (the sort, a warning) are not written to the terminal again."""

    DEFAULT_CSS = """
    HeaderBar { height: auto; padding: 0 1; }
    """

    _line_count: int | None = None  # lines shown (folded by `wrap_items`, never cut)
    _args: tuple[Snapshot | None, dict[str, object]] | None = None
    _tall_until = 0.0  # monotonic time until which a shorter text keeps the height
    clock = staticmethod(time.monotonic)

    def on_resize(self) -> None:
        self._tall_until = 0.0  # a new width: fit it now, no height held from the old one
        if self._args is not None:
            snapshot, kwargs = self._args
            self.show(snapshot, **kwargs)

    def show(self, snapshot: Snapshot | None, **kwargs: object) -> None:
        self._args = (snapshot, kwargs)
        width = self.content_region.width
        text = wrap_items(header_text(snapshot, **kwargs, width=width), width)  # type: ignore[arg-type]
        lines = text.plain.count("\n") + 1
        now = self.clock()
        if self._line_count is not None and lines < self._line_count and now < self._tall_until:
            text.append("\n" * (self._line_count - lines))  # blank lines hold the height
            lines = self._line_count
        elif self._line_count is None or lines >= self._line_count:
            self._tall_until = now + HEIGHT_HOLD_S
        if lines != self._line_count:
            # said, not left to `height: auto`: with the panels under it folded (a short
            # terminal) nothing else relaid the screen, and the header kept its old height
            self.styles.height = lines
        # drawn line by line (TextLines): only the cells that changed reach the terminal;
        # a layout of the whole screen only when the header's height changes (TextLines
        # lays out when its rows change), not every frame: at 128 nodes a layout pass
        # costs several ms
        rows = list(text.split("\n", allow_blank=True))
        for row in rows:  # folded to the width already: never wrapped again
            row.no_wrap = True
        self.update(rows)
        self._line_count = lines
