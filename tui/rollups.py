"""The per-role roll-up strip: prefill pool, decode pool, …, and the whole cluster.

Drawn as fixed-width text of a known height, not as a Rich `Table`: a table in a widget
of `height: auto` is rendered once to measure its height and again to paint it, two or
three times a frame (~14 ms a frame at 128 nodes). Here the columns are laid out once
per change, the height is set only when the number of pools changes, and an unchanged
strip is not touched at all.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from infertop.monitor.format import fmt_num, fmt_pct, fmt_usd, inert_text
from infertop.monitor.snapshot import RollupView, Snapshot
from infertop.tui.columns import WARN
from infertop.tui.text_lines import TextLines

_HEADERS = ("POOL", "NODES", "GPUS", "UTIL", "STEPS/S", "ACCEPT", "TOK/S", "FULL TOK/S",
            "RUN", "WAIT", "$/H", "IDLE")
# on a narrow terminal columns are left out whole (a figure is never cut), in this order;
# the pool, its node count, tokens/s, $/h and idle stay
DROP_ORDER = (7, 9, 8, 2, 5, 3, 4)
HEADER_STYLE = "bold grey70"
CLUSTER_STYLE = "bold"

Row = tuple[str, ...]


def nodes_cell(r: RollupView) -> str:
    """"96", or "71/96" when only 71 of the pool's 96 nodes are in its figures."""
    if r.partial:
        return f"{r.nodes_counted}/{r.nodes_expected}"
    return str(r.nodes)


def _row(label: str, r: RollupView) -> Row:
    return (
        inert_text(label),
        nodes_cell(r),
        str(r.gpus),
        fmt_num(r.util_pct, 0, "%"),
        fmt_num(r.decode_steps_per_s, 1),
        fmt_pct(r.draft_acceptance),
        fmt_num(r.accepted_tokens_per_s, 0),
        fmt_num(r.full_acceptance_tokens_per_s, 0),
        fmt_num(r.requests_running, 0),
        fmt_num(r.requests_waiting, 0),
        fmt_usd(r.cost_per_hour_usd),
        fmt_pct(r.idle_fraction),
    )


def rollup_rows(snapshot: Snapshot) -> list[Row]:
    """One row per role pool, then the whole cluster (always last)."""
    rows = [_row(f"{role} pool", view) for role, view in snapshot.cluster.roles.items()]
    rows.append(_row("cluster", snapshot.cluster.total))
    return rows


def _fitting(rows: list[Row], width: int | None) -> tuple[Row, list[Row]]:
    """The header and rows with columns left out whole, in DROP_ORDER, until they fit."""
    keep = list(range(len(_HEADERS)))

    def inner() -> int:
        widths = [max(cell_len(r[i]) for r in [_HEADERS, *rows]) for i in keep]
        return sum(widths) + 3 * len(widths) - 1

    for column in DROP_ORDER:
        if width is None or inner() + 2 <= width:
            break
        keep.remove(column)
    return tuple(_HEADERS[i] for i in keep), [tuple(r[i] for i in keep) for r in rows]


def rollup_text(rows: list[Row], width: int | None = None) -> Text:
    """The rows laid out as Rich's `box.SIMPLE_HEAD` table drew them: a blank edge line,
    the header, a rule, the rows (the last one, the cluster, in bold), a blank edge line.
    Each column is as wide as its widest cell, padded by one space on each side; the
    first column is left-aligned, the figures right-aligned. Within `width` cells, the
    columns that do not fit are left out whole."""
    headers, rows = _fitting(rows, width)
    widths = [cell_len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_len(cell))
    inner = sum(widths) + 3 * len(widths) - 1  # " cell " per column, one space between

    def cells_of(cells: Row) -> list[str]:
        return [
            (c + " " * (w - cell_len(c))) if i == 0 else (" " * (w - cell_len(c)) + c)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]

    blank = " " * (inner + 2)
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append(blank + "\n ")
    # styled exactly as the table styled them (the header's padding too), so the
    # picture is unchanged cell for cell
    for i, cell in enumerate(cells_of(headers)):
        text.append(" " + cell + " ", HEADER_STYLE)
        text.append(" " if i < len(widths) - 1 else " \n")
    text.append(" " + "─" * inner + " \n")
    for r, row in enumerate(rows):
        style = CLUSTER_STYLE if r == len(rows) - 1 else ""
        text.append(" ")
        for i, cell in enumerate(cells_of(row)):
            text.append(" ")
            # a partial sum is marked where the count is: "71/96" in the warning colour
            partial = i == 1 and "/" in cell and headers[1] == "NODES"
            text.append(cell, f"{style} {WARN}".strip() if partial else style)
            text.append("  ")
        text.append("\n")
    text.append(blank)
    return text


class RollupStrip(TextLines):
    """Drawn line by line (`TextLines`): a frame repaints the cells that changed, not the
    strip's header, rule and blank edges with them."""

    DEFAULT_CSS = """
    RollupStrip { height: auto; padding: 0 1; }
    """

    _pool_rows: list[Row] | None = None  # what is on screen
    _width: int | None = None  # the width it was laid out for
    _text: Text | None = None

    @property
    def content(self) -> Text:
        """The strip's text, as drawn (one line per screen row)."""
        return self._text if self._text is not None else Text("")

    def _fit_width(self) -> int | None:
        return self.content_region.width or None

    def _draw(self, text: Text) -> None:
        self._text = text
        lines = text.split("\n", allow_blank=True)
        for line in lines:  # a figure is never wrapped onto a second row
            line.no_wrap = True
            line.overflow = "ellipsis"
        self.update(list(lines))

    def show(self, snapshot: Snapshot) -> None:
        rows = rollup_rows(snapshot)
        width = self._fit_width()
        if rows == self._pool_rows and width == self._width:
            return  # the same figures: no render, no repaint
        resized = self._pool_rows is None or len(rows) != len(self._pool_rows)
        self._pool_rows, self._width = rows, width
        if resized:
            # a known height: Textual need not render the text to measure it
            self.styles.height = len(rows) + 4
        self._draw(rollup_text(rows, width))

    def on_resize(self) -> None:
        if self._pool_rows is not None and self._fit_width() != self._width:
            self._width = self._fit_width()
            self._draw(rollup_text(self._pool_rows, self._width))
