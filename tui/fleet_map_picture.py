"""Where the fleet map puts each node: pure placement of groups into lines of a width.

One cell (one character) per node; each state has its own glyph, so the map reads
without colour too. A pool is a title line with its counts, then its groups as blocks
(a label, then the cells wrapped to the width) packed side by side onto shelves. When
that does not fit the height, groups are folded: healthy nodes become a count and only
the others keep a cell, so trouble stays on screen however small the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infertop.monitor.fleet_map import MAP_STATES, MapCell, MapGroup, MapState

GLYPH: dict[MapState, str] = {
    "error": "E", "unreachable": "U", "critical": "X", "warning": "!",
    "blind": "?", "stale": "~", "info": "i", "ok": ".",
}
STATE_STYLE: dict[MapState, str] = {
    "error": "bold red", "unreachable": "bold red", "critical": "bold red", "warning": "yellow",
    "blind": "magenta", "stale": "grey50", "info": "cyan", "ok": "green",
}
LABEL_MAX = 14  # a group label longer than this is cut (the detail line has it whole)
BLOCK_GAP = 2  # blank cells between two groups on one shelf

# an atom: (x, text, style, node name or None)
Atom = tuple[int, str, str, str | None]


@dataclass(frozen=True)
class MapPicture:
    lines: tuple[tuple[Atom, ...], ...]  # each line's atoms, left to right
    cells: tuple[tuple[str, int, int], ...]  # (node, line, x) in reading order
    folded: bool


def legend() -> list[tuple[str, str]]:
    """(text, style) pieces: every glyph and what it means, worst first."""
    return [(f"{GLYPH[s]} {s}", STATE_STYLE[s]) for s in MAP_STATES]


def _label(group: MapGroup) -> str:
    label = group.group or ""
    if label.startswith(f"{group.pool}-"):  # "decode-[001-016]" in the decode pool: "[001-016]"
        label = label[len(group.pool) + 1:]
    return label if len(label) <= LABEL_MAX else label[: LABEL_MAX - 1] + "…"


def _title(pool: str, groups: Sequence[MapGroup]) -> tuple[Atom, ...]:
    counts: dict[MapState, int] = {}
    for group in groups:
        for state, n in group.counts().items():
            counts[state] = counts.get(state, 0) + n
    total = sum(counts.values())
    text = f"{pool.upper()} {total} node{'s' if total != 1 else ''}"
    atoms: list[Atom] = [(0, text, "bold", None)]
    x = len(text)
    for state in MAP_STATES:
        if state in counts:
            piece = f"  {GLYPH[state]}{counts[state]} {state}"
            atoms.append((x, piece, STATE_STYLE[state] if state != "ok" else "", None))
            x += len(piece)
    return tuple(atoms)


def _rows(cells: Sequence[MapCell], first: Sequence[Atom], room: int) -> list[list[Atom]]:
    """`first` (a count) then the cells, wrapped to `room` columns; x relative to the block."""
    rows: list[list[Atom]] = [list(first)]
    x = sum(len(a[1]) for a in first)
    for cell in cells:
        if x >= room and x > 0:
            rows.append([])
            x = 0
        rows[-1].append((x, GLYPH[cell.state], STATE_STYLE[cell.state], cell.name))
        x += 1
    return rows


def _block(group: MapGroup, label_w: int, width: int, folded: bool) -> tuple[int, list[list[Atom]]]:
    """The group as rows of atoms (label first), and its width."""
    lead = label_w + 1 if label_w else 0
    room = max(width - lead, 1)
    if folded:
        ok = sum(1 for c in group.cells if c.state == "ok")
        first: list[Atom] = [(0, f"{GLYPH['ok']}{ok} ", "green" if ok else "grey50", None)]
        rows = _rows([c for c in group.cells if c.state != "ok"], first, room)
    else:
        rows = _rows(group.cells, (), room)
    shifted = [[(x + lead, t, s, n) for x, t, s, n in row] for row in rows]
    if label_w:
        shifted[0].insert(0, (0, _label(group), "grey70", None))
    block_w = lead + max((x + len(t) for row in rows for x, t, _, _ in row), default=0)
    return block_w, shifted


def _pool_lines(pool: str, groups: Sequence[MapGroup], width: int, folded: bool) -> list[list[Atom]]:
    lines: list[list[Atom]] = [list(_title(pool, groups))]
    labels = [_label(g) for g in groups]
    label_w = max((len(label) for label in labels), default=0)
    blocks = [_block(g, label_w, width, folded) for g in groups
              if not folded or g.worst != "ok"]
    calm = len(groups) - len(blocks)
    if calm:
        # folded: the groups with every node healthy are told as one count
        note = f"{calm} group{'s' if calm != 1 else ''} all ok" if len(groups) > 1 else "all ok"
        if blocks:
            blocks.append((len(note), [[(0, note, "grey50", None)]]))
        else:
            end = lines[0][-1]
            lines[0].append((end[0] + len(end[1]), f"  ({note})", "grey50", None))
    shelf: list[list[Atom]] = []
    x = 0
    for block_w, rows in blocks:
        if shelf and x + block_w > width:
            lines += shelf
            shelf, x = [], 0
        while len(shelf) < len(rows):
            shelf.append([])
        for line, row in zip(shelf, rows, strict=False):
            line.extend((x + ax, t, s, n) for ax, t, s, n in row)
        x += block_w + BLOCK_GAP
    lines += shelf
    return lines


def draw_map(groups: Sequence[MapGroup], width: int, height: int | None = None) -> MapPicture:
    """Place every group's nodes in lines of `width` cells; folded when the whole map
    would be taller than `height` (None: never folded)."""
    width = max(width, 8)
    pools: dict[str, list[MapGroup]] = {}
    for group in groups:
        pools.setdefault(group.pool, []).append(group)

    def picture(folded: bool) -> list[list[Atom]]:
        return [line for pool, members in pools.items()
                for line in _pool_lines(pool, members, width, folded)]

    lines = picture(folded=False)
    folded = height is not None and len(lines) > height
    if folded:
        lines = picture(folded=True)
    cells = tuple((a[3], y, a[0]) for y, line in enumerate(lines) for a in line if a[3] is not None)
    return MapPicture(tuple(tuple(line) for line in lines), cells, folded)
