"""At 80x24 every flagged node shows with its verdict and $/h at stake (issue 47): the
hunt list grows to hold every row while the node table keeps its header and five node
rows (`overview.panel_lines`, the one size rule); what even that cannot hold is said in
the list's title ("+N more"), never dropped unsaid. The frames come from the real
Monitor's intake (`FrozenFeed`): nodes with a port down, judged by the monitor."""

from __future__ import annotations

import pytest

from infertop.monitor.evaluation.verdicts import hunt_order
from infertop.tui.app import InfertopApp
from infertop.tui.hunt_list import HuntList
from infertop.tui.hunt_panel import HuntPanel
from infertop.tui.overview import NODE_TABLE_MIN_LINES, panel_lines
from tests.support.tui_helpers import FrozenFeed, NodeSpec, screen_text, wait_for


@pytest.mark.parametrize(
    ("screen", "shared", "compact", "wanted", "expected"),
    [
        (24, 21, True, 4, 10),  # a short list: the panels' usual share when compact
        (24, 21, True, 12, 12),  # every verdict: the list grows past the usual share
        (24, 21, True, 30, 21 - NODE_TABLE_MIN_LINES),  # the node table keeps its minimum
        (45, 36, False, 10, 15),  # wide: a third of the screen
        (45, 36, False, 20, 20),
        (10, 4, True, 8, 0),  # no room at all: the table's minimum first
    ],
)
def test_panel_lines(screen: int, shared: int, compact: bool, wanted: int, expected: int) -> None:
    assert panel_lines(screen, shared, compact, wanted) == expected


def fleet() -> list[NodeSpec]:
    """12 flagged nodes of 18, three a kind (four starting together would be one mass
    event): ports down, slow, unreachable, unread ports (no known stake)."""
    def nodes(first: int, **trouble: object) -> list[NodeSpec]:
        return [NodeSpec(f"decode-{i:02d}", gpus=1, **trouble) for i in range(first, first + 3)]  # type: ignore[arg-type]

    return [*nodes(1, down_nics=("mlx5_1",)), *nodes(4, steps_per_s=12.0),
            *nodes(7, error="connection refused"), *nodes(10, dead_node_exporter="connection refused"),
            *nodes(13), *nodes(16)]


def drawn_lines(app: InfertopApp, widget: HuntList) -> list[str]:
    lines = screen_text(app).splitlines()
    region = widget.region
    return [line[region.x:region.right] for line in lines[region.y:region.bottom]]


async def test_every_flagged_node_with_its_verdict_and_stake_at_80x24() -> None:
    feed = FrozenFeed(fleet(), ticks=5, interval_s=4.0)
    frame = feed.frames[-1]
    flagged = hunt_order(frame.nodes)
    assert len({node.name for node, _ in flagged}) == 12, flagged  # the monitor judged them
    assert not frame.verdict_groups  # one row a node
    app = InfertopApp(feed)
    async with app.run_test(size=(80, 24)) as pilot:
        hunt = app.overview.query_one(HuntList)
        await wait_for(pilot, lambda: app.overview.snapshot is frame and hunt.row_count == len(flagged))
        await wait_for(pilot, lambda: hunt.region.height == len(flagged) + 1)
        drawn = drawn_lines(app, hunt)
        assert "STAKE" in drawn[0]
        for node, verdict in flagged:
            row = next((line for line in drawn if f" {node.name} " in line), None)
            assert row is not None, (node.name, drawn)
            assert verdict.kind in row
            assert ("$" if verdict.usd_per_hour_at_stake is not None else "—") in row
        # the node table keeps its header and five node rows
        assert app.overview.table.region.height >= NODE_TABLE_MIN_LINES
        assert "more (" not in screen_text(app)


async def test_rows_past_the_room_are_said_not_dropped() -> None:
    feed = FrozenFeed(fleet(), ticks=5, interval_s=4.0)
    frame = feed.frames[-1]
    rows = len(hunt_order(frame.nodes))
    app = InfertopApp(feed)
    async with app.run_test(size=(80, 20)) as pilot:  # four lines short of every row
        hunt = app.overview.query_one(HuntList)
        panel = app.overview.query_one(HuntPanel)
        await wait_for(pilot, lambda: app.overview.snapshot is frame and hunt.row_count == rows)
        # the rows drawn and the rows said: every one of them, once the layout settled
        await wait_for(pilot, lambda: 0 < hunt.region.height - 1 < rows and
                       f"+{rows - (hunt.region.height - 1)} more (Tab, ↓)" in screen_text(app))
        assert panel.rows_left_out() == rows - (hunt.region.height - 1)
        assert app.overview.table.region.height >= NODE_TABLE_MIN_LINES

