"""The node screen's per-position acceptance chart: each bar's length is its share."""

from __future__ import annotations

import pytest

from infertop.tui.draft_chart import EMPTY, FULL, bar, position_chart


@pytest.mark.parametrize("share", [0.0, 0.2, 0.5, 0.81, 1.0])
def test_a_bar_is_its_share_of_the_cells(share: float) -> None:
    drawn = bar(share, 10)
    assert len(drawn) == 10
    assert drawn.count(FULL) == int(share * 10 + 1e-9)
    assert drawn.endswith(EMPTY) or share == 1.0 or drawn.count(FULL) + 1 == 10


def test_the_chart_names_each_position_with_its_share_and_unknown_as_unknown() -> None:
    text = position_chart([0.8, 0.5, None]).plain
    assert "1 " + FULL * 8 + EMPTY * 2 + " 80%" in text
    assert "2 " + FULL * 5 + EMPTY * 5 + " 50%" in text
    assert text.rstrip().endswith("3            —")
    assert position_chart(None).plain == ""


def test_the_node_screens_engine_block_draws_the_chart_where_served() -> None:
    from infertop.monitor.snapshot import EngineView
    from infertop.tui.node_rows import engine_text

    shown = engine_text(EngineView(draft_acceptance=0.5, acceptance_by_position=[0.8, 0.5, 0.2]), []).plain
    assert "accepted by draft position  1 ████████░░ 80%  2 █████░░░░░ 50%  3 ██░░░░░░░░ 20%" in shown
    assert "draft position" not in engine_text(EngineView(draft_acceptance=0.5), []).plain
