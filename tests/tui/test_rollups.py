"""The roll-up strip: fixed-width text that looks exactly like the Rich table it replaced,
a known height (no measuring render), and no update at all when the figures are the same."""

from __future__ import annotations

import pytest
from rich import box
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult

from infertop.monitor.snapshot import ClusterView, RollupView, SessionView, Snapshot
from infertop.tui.rollups import _HEADERS, RollupStrip, rollup_rows, rollup_text
from infertop.tui.text import inert

BUSY = RollupView(
    nodes=64, gpus=512, util_pct=55.3, decode_steps_per_s=33.25, draft_acceptance=0.71,
    accepted_tokens_per_s=123_456.0, full_acceptance_tokens_per_s=234_567.0,
    requests_running=100.0, requests_waiting=3.0, cost_per_hour_usd=5417.98, idle_fraction=0.1,
)
EMPTY = RollupView(nodes=1, gpus=8)
HUGE = RollupView(nodes=100_000, gpus=800_000, accepted_tokens_per_s=9.9e12, cost_per_hour_usd=1.23e9)


def snapshot(roles: dict[str, RollupView], total: RollupView = BUSY) -> Snapshot:
    session = SessionView(
        started_at="2026-01-01T00:00:00+00:00", elapsed_s=0.0, cost_per_hour_usd=None, spend_usd=None,
        idle_spend_usd=None, budget_usd=None, usd_per_million_output_tokens=None, api_equivalent_usd=None,
    )
    cluster = ClusterView(name="c", interval_s=1.0, total=total, roles=roles)
    return Snapshot(taken_at="2026-01-01T00:00:00+00:00", window_s=10.0, cluster=cluster,
                    session=session, nodes=[])


def table_reference(snap: Snapshot) -> Table:
    """The strip as it was drawn before: a Rich table."""
    table = Table(box=box.SIMPLE_HEAD, expand=False, padding=(0, 1), header_style="bold grey70")
    for i, name in enumerate(_HEADERS):
        table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
    rows = rollup_rows(snap)
    for row in rows[:-1]:
        table.add_row(*(inert(c) for c in row))
    table.add_row(*(inert(c, "bold") for c in rows[-1]))
    return table


def cells(renderable: RenderableType, width: int = 200) -> list[list[tuple[str, Style | None]]]:
    """Every character on screen with its style, line by line (segment splits ignored)."""
    console = Console(width=width, color_system="truecolor", legacy_windows=False)
    lines = console.render_lines(renderable, console.options, pad=False)
    out = []
    for line in lines:
        chars = [(ch, seg.style or None) for seg in Segment.simplify(line) for ch in seg.text]
        while chars and chars[-1][0] == " " and not chars[-1][1]:
            chars.pop()  # the table pads lines to the width; trailing blanks are nothing
        out.append(chars)
    return out


@pytest.mark.parametrize(
    "roles",
    [
        {"decode": BUSY},
        {"decode": BUSY, "mixed": EMPTY, "prefill": HUGE},
        {},
        {"prefill": EMPTY},
    ],
    ids=["one-pool", "three-pools", "no-pools", "all-unknown"],
)
def test_text_draws_what_the_table_drew(roles: dict[str, RollupView]) -> None:
    snap = snapshot(roles)
    assert cells(rollup_text(rollup_rows(snap))) == cells(table_reference(snap))


def test_unknown_is_a_dash_never_zero() -> None:
    rows = rollup_rows(snapshot({"prefill": EMPTY}, total=EMPTY))
    assert rows[0][3:] == ("—",) * 9  # every figure unknown
    assert rows[-1][0] == "cluster"


class StripApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RollupStrip(id="rollups")


async def test_fixed_height_and_no_update_when_unchanged() -> None:
    app = StripApp()
    async with app.run_test(size=(160, 20)) as pilot:
        strip = app.query_one(RollupStrip)
        strip.show(snapshot({"decode": BUSY, "prefill": EMPTY}))
        await pilot.pause()
        # header, rule, three rows and two blank edges: a fixed height, no measuring
        assert strip.styles.height is not None and strip.styles.height.is_cells
        assert strip.styles.height.value == 7
        assert strip.size.height == 7
        drawn = strip.content
        strip.show(snapshot({"decode": BUSY, "prefill": EMPTY}))  # equal figures, new objects
        assert strip.content is drawn
        changed = BUSY.model_copy(update={"requests_waiting": 42.0})
        strip.show(snapshot({"decode": changed, "prefill": EMPTY}))
        assert strip.content is not drawn
        assert "42" in str(strip.content)
        strip.show(snapshot({"decode": changed}))  # a pool gone: the height follows
        await pilot.pause()
        assert strip.size.height == 6


def test_a_partial_pool_shows_how_many_nodes_it_counted() -> None:
    partial = BUSY.model_copy(update={"nodes": 96, "nodes_counted": 71, "nodes_expected": 96})
    whole = BUSY.model_copy(update={"nodes_counted": 64, "nodes_expected": 64})
    rows = rollup_rows(snapshot({"decode": partial, "prefill": whole}, total=partial))
    assert [(r[0], r[1]) for r in rows] == [("decode pool", "71/96"), ("prefill pool", "64"), ("cluster", "71/96")]
    lines = cells(rollup_text(rows))
    decode_line = "".join(ch for ch, _ in lines[3])
    at = decode_line.index("71/96")
    assert all(style is not None and style.color is not None and style.color.name == "yellow"
               for _, style in lines[3][at:at + 5])


def test_the_session_tokens_per_s_says_when_it_is_partial() -> None:
    from infertop.tui.history import SpendHistory
    from infertop.tui.session_panel import session_lines

    session = snapshot({}).session.model_copy(update={"accepted_tokens_per_s": 1234.0})
    partial = BUSY.model_copy(update={"nodes_counted": 71, "nodes_expected": 96})
    whole = BUSY.model_copy(update={"nodes_counted": 64, "nodes_expected": 64})
    line = next(t.plain for t in session_lines(session, SpendHistory(), tokens_from=partial) if t.plain.startswith("tok/s"))
    assert line.endswith(" 1,234 (71/96 nodes)")
    line = next(t.plain for t in session_lines(session, SpendHistory(), tokens_from=whole) if t.plain.startswith("tok/s"))
    assert line.endswith(" 1,234")


@pytest.mark.parametrize("width", [78, 100, 120, 200])
async def test_on_a_narrow_terminal_columns_are_left_out_whole(width: int) -> None:
    """At 80 columns the strip used to end in "134,79…": a figure is never cut; the
    columns that do not fit are left out, the pool, tokens/s, $/h and idle stay."""
    app = StripApp()
    async with app.run_test(size=(width + 2, 20)) as pilot:
        strip = app.query_one(RollupStrip)
        strip.show(snapshot({"decode": BUSY, "prefill": HUGE}, total=BUSY))
        await pilot.pause()
        text = strip.content.plain if isinstance(strip.content, Text) else str(strip.content)
        lines = [line.rstrip() for line in text.splitlines()]
        assert all(cell_len(line) <= strip.content_region.width for line in lines), lines
        assert "…" not in text
        header = lines[1].split()
        for kept in ("POOL", "NODES", "TOK/S", "$/H", "IDLE"):
            assert kept in header, header
        assert "$1,230,000,000.00" in text and "9,900,000,000,000" in text  # whole, not cut
        if width >= 200:
            assert header == [h for h in _HEADERS for h in h.split()], header
