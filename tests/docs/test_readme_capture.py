"""The README's screen capture is the screen (issue 47: it went stale silently): the
16-node demo's frozen frames (`tests.support.demo_frames`, recorded by the real monitor)
drawn through Pilot at the capture's own size, and its STRUCTURE compared with the
README's capture and docs/tui.md's captures per size — panel titles, column headers, the
key footer, the node names down the node table — not the live figures, which differ from
one run to the next. A screen whose structure changed fails here until the captures are
taken again (`python scripts/tmux_capture.py`, the real binary in tmux).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infertop.tui import rollups
from infertop.tui.app import InfertopApp
from infertop.tui.row_table import RowTable
from tests.support.demo_frames import DemoFramesFeed
from tests.support.tui_helpers import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]
BOX = "│╭╮╰╯▏▔"
# a column header: three or more words in capitals ("NODE", "$/H", "TOK/S", "#")
_HEADER_WORD = re.compile(r"^[A-Z#$/%][A-Z0-9#$/%.]*$")
_NODE = re.compile(r"^((?:prefill|decode)-\d+)\s")


def captures(text: str, intro: str) -> dict[tuple[int, int], list[str]]:
    """The captures in a Markdown page: each "```text" block after a line naming its size
    ("`make demo` at 120x36"), as lines."""
    out: dict[tuple[int, int], list[str]] = {}
    for m in re.finditer(intro + r" at (\d+)x(\d+)[^\n]*\n+```text\n(.*?)\n```", text, re.S):
        out[(int(m[1]), int(m[2]))] = m[3].split("\n")
    return out


def _words(text: str) -> str:
    """Words with the figures left out: "hunt list · 8 verdicts" → "hunt list · # verdicts"."""
    return " ".join(re.sub(r"\d[\d,.:]*", "#", text).split())


def structure(lines: list[str]) -> list[str]:
    """What stays from one run to the next: panel titles, column headers (in order), the
    footer's keys and the node table's node names, in screen order."""
    out: list[str] = []
    in_nodes = False
    for line in lines[:-1]:
        for title in re.findall(r"[╭─]─ ([^─╮]+?) ─", line):
            out.append("title: " + _words(title.rstrip("…")).split(" · ")[0])
        for cell in re.split(f"[{BOX}]", line):
            words = cell.split()
            if len(words) >= 3 and all(_HEADER_WORD.match(w) for w in words):
                out.append("header: " + " ".join(words))
                in_nodes = words[0] == "NODE" and "STATUS" in words
                break
        else:
            node = _NODE.match(line)
            if in_nodes and node:
                out.append("node: " + node[1])
            elif in_nodes and line.strip():
                in_nodes = False
    footer = lines[-1].split("▏")[0]
    out.append("footer: " + " ".join(footer.split()))
    return out


class LiveDemoFrames(DemoFramesFeed):
    """The frozen frames offered as the live demo is: its phase can be marked (the footer's
    `m Phase`, as `make demo` shows it)."""

    def mark_phase(self, phase: str) -> None:
        pass


def header_forms(table: RowTable) -> set[str]:
    """Every column header `table` can show: a fitted table leaves out its lowest-priority
    columns first, as many as the width (and the figures' widths) ask; any table may show
    only its first columns where it scrolls sideways."""
    labels = [c.label for c in table.columns]
    order = sorted(range(len(labels)), key=lambda i: (-table.columns[i].priority, i))
    forms = {" ".join(labels[:k]) for k in range(1, len(labels) + 1)}
    for k in range(1, len(labels) + 1):
        kept = sorted(set(order[:k]) | set(range(table.frozen)))
        forms.add(" ".join(labels[i] for i in kept))
    return {" ".join(form.split()) for form in forms}


def rollup_header_forms() -> set[str]:
    """The roll-ups' headers: their columns left out whole in `DROP_ORDER`."""
    keep = list(range(len(rollups._HEADERS)))
    forms = {" ".join(rollups._HEADERS)}
    for column in rollups.DROP_ORDER:
        keep.remove(column)
        forms.add(" ".join(rollups._HEADERS[i] for i in keep))
    return forms


async def drawn(size: tuple[int, int]) -> tuple[list[str], set[str]]:
    """The screen at `size` as lines, and every column header its tables can show."""
    feed = LiveDemoFrames(16)
    frame = feed.frames[-1]
    app = InfertopApp(feed)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.overview.snapshot is frame)
        await wait_for(pilot, lambda: "Quit" in screen_text(app).splitlines()[-1])  # the footer drawn
        headers = set().union(rollup_header_forms(), *(header_forms(t) for t in app.screen.query(RowTable)))
        return [line.rstrip() for line in screen_text(app).splitlines()], headers


def assert_same_structure(captured: list[str], now: tuple[list[str], set[str]], where: str) -> None:
    """Titles and footer the same; each column header one the table shows now at some
    width (which columns fit follows the live figures' widths); the node rows the same
    nodes in the same order."""
    lines, headers = now
    want, got = structure(captured), structure(lines)
    nodes_want = [s for s in want if s.startswith("node: ")]
    nodes_got = [s for s in got if s.startswith("node: ")]
    # the node rows that fit follow the hunt list's length, which the live run sets: the
    # same nodes in the same order, as many as both show
    shown = min(len(nodes_want), len(nodes_got))
    assert shown >= 1, (where, want, got)
    assert nodes_want[:shown] == nodes_got[:shown], where
    stale = [s for s in want if s.startswith("header: ") and s.removeprefix("header: ") not in headers]
    rest_want = [s if not s.startswith("header: ") else "header" for s in want if not s.startswith("node: ")]
    rest_got = [s if not s.startswith("header: ") else "header" for s in got if not s.startswith("node: ")]
    assert not stale and rest_want == rest_got, (
        f"{where}: the capture no longer shows the screen; take it again "
        f"(python scripts/tmux_capture.py)\nheaders no table shows now: {stale}"
        f"\ncaptured: {rest_want}\nnow:      {rest_got}")


def test_structure_reads_titles_headers_nodes_and_footer() -> None:
    """The reading itself, on a known screen: a figure changed is the same structure, a
    column added is not."""
    screen = ["╭─ session ──╮╭─ hunt list · 8 verdicts · FOR hidden ─╮",
              "│spend $1.00 ││SEV      NODE       VERDICT   STAKE $/H│",
              "NODE       STATUS   $/H",
              "decode-01  ok       $84.66",
              "⏎ Open node q Quit ▏^p palette"]
    assert structure(screen) == ["title: session", "title: hunt list", "header: SEV NODE VERDICT STAKE $/H",
                                 "header: NODE STATUS $/H", "node: decode-01", "footer: ⏎ Open node q Quit"]
    figures_changed = [line.replace("8 verdicts", "3 verdicts").replace("84.66", "9.10") for line in screen]
    assert structure(figures_changed) == structure(screen)
    assert structure([screen[0], screen[1].replace("SEV ", "SEV # "), *screen[2:]]) != structure(screen)


README = ROOT / "README.md"


async def test_the_readme_capture_is_the_screen() -> None:
    (size, captured), = captures(README.read_text(), r"`make demo`").items()
    assert_same_structure(captured, await drawn(size), f"README.md at {size[0]}x{size[1]}")


TUI_DOC = captures((ROOT / "docs" / "tui.md").read_text(), r"`make demo`")


@pytest.mark.parametrize("size", sorted(TUI_DOC), ids=[f"{w}x{h}" for w, h in sorted(TUI_DOC)])
async def test_the_tui_doc_captures_are_the_screen(size: tuple[int, int]) -> None:
    assert_same_structure(TUI_DOC[size], await drawn(size), f"docs/tui.md at {size[0]}x{size[1]}")
