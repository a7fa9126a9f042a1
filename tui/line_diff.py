"""Which cells of a drawn line changed: so a widget repaints those, not the whole widget.

Textual writes to the terminal every cell of every region a widget marks dirty, and a
plain `refresh()` marks the whole widget: a table whose figures change every second was
rewritten whole every frame (21.5 KB/s at 160x45 for 16 nodes). A Line-API widget that
knows the strip it drew last for a line and the strip it would draw now can mark only the
spans that differ (`Widget.refresh(Region)`, public API), and the terminal gets those.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

Cell = tuple[str, Style | None]


def _cells(strip: Strip) -> list[Cell]:
    """One entry per terminal cell: its character and style (a wide character's second
    cell is an empty string, so a change to it marks both)."""
    out: list[Cell] = []
    for segment in strip:
        if segment.control:
            continue
        style = segment.style
        for char in segment.text:
            out.append((char, style))
            if cell_len(char) == 2:
                out.append(("", style))
    return out


def changed_end(old: Strip | None, new: Strip, width: int) -> int:
    """How many cells from the left of the line to repaint so that it shows `new`
    instead of `old`: up to the last cell that differs (0: they look the same; `width`
    when nothing was drawn before).

    One span from the left edge, not a span per change: Textual writes a partial update
    from the start of the widget's piece of the line to the span's end, so a second span
    on a line would write its start again."""
    if old is None:
        return max(width, 0)
    if old is new:
        return 0
    before, after = _cells(old), _cells(new)
    end = min(max(len(before), len(after)), width)
    while end > 0:
        x = end - 1
        if x < len(before) and x < len(after) and before[x] == after[x]:
            end -= 1
            continue
        break
    return end


def _blank_look(style: Style | None) -> object:
    """What a cell of spaces shows under `style`: its background and the lines drawn
    through it; colour, bold, dim and italic of a space are invisible (reversed, the
    colour is the background: the whole style counts)."""
    if style is None or style.reverse:
        return style
    return (style.bgcolor, style.underline, style.underline2, style.strike, style.overline,
            style.blink, style.blink2, style.link)


def join_runs(segments: Iterable[Segment]) -> list[Segment]:
    """Segments that look the same drawn as fewer: a run of one style is one segment, and
    spaces between figures take the style of the figure beside them when they would look
    the same (bold spaces are spaces). Textual writes each segment with its whole colour
    code and a reset, so on a table row of bold figures and plain gaps the codes were
    half the bytes the terminal received."""
    out: list[Segment] = []
    for segment in segments:
        if out and not segment.control and not out[-1].control:
            last = out[-1]
            if last.style == segment.style:
                out[-1] = Segment(last.text + segment.text, last.style)
                continue
            look = _blank_look(segment.style)
            if look == _blank_look(last.style):
                if not segment.text.strip(" "):  # spaces after: they take the last style
                    out[-1] = Segment(last.text + segment.text, last.style)
                    continue
                if not last.text.strip(" "):  # spaces before: they take this one's
                    out[-1] = Segment(last.text + segment.text, segment.style)
                    continue
        out.append(segment)
    return out
