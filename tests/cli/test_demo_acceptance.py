"""`make demo` shows an acceptance collapse (issue 43): decode-04's drafter stops agreeing
with its target COLLAPSE_START_S in and recovers COLLAPSE_FOR_S later; read from the demo's
realistic pages through the real parsers and the monitor, the verdict comes and goes on
that node alone, priced, with the per-position figures behind it."""

from __future__ import annotations

import pytest

from infertop.demo.scenario import COLLAPSE_FOR_S, COLLAPSE_START_S, trouble_nodes
from infertop.monitor.evaluation.conditions import ACCEPTANCE_DROP
from infertop.monitor.snapshot import Snapshot
from tests.cli.test_demo_pd_trouble import T0, run_demo

STEP_S = 5.0
WINDOW_S = 10.0
HOLD_S = 10.0  # run_demo's layout


@pytest.fixture(scope="module")
def frames() -> list[Snapshot]:
    # past the collapse's end, its clear time and one window
    ticks = int((COLLAPSE_START_S + COLLAPSE_FOR_S + 40.0) / STEP_S)
    return run_demo(ticks, step_s=STEP_S, window_s=WINDOW_S)[1]


def flagged(snap: Snapshot) -> set[str]:
    return {n.name for n in snap.nodes if any(v.kind == ACCEPTANCE_DROP for v in n.verdicts)}


def test_the_collapsing_node_alone_is_flagged_while_it_lasts(frames: list[Snapshot]) -> None:
    node = trouble_nodes(8)["acceptance_collapse"]
    on = [i for i, s in enumerate(frames, start=1) if flagged(s)]
    assert all(flagged(frames[i - 1]) == {node} for i in on)
    first, last = on[0] * STEP_S, on[-1] * STEP_S
    assert COLLAPSE_START_S < first <= COLLAPSE_START_S + HOLD_S + WINDOW_S + STEP_S
    assert COLLAPSE_START_S + COLLAPSE_FOR_S <= last + STEP_S
    assert not flagged(frames[-1])  # recovered and cleared


def test_the_verdict_is_priced_and_shows_where_the_drafter_fails(frames: list[Snapshot]) -> None:
    node = trouble_nodes(8)["acceptance_collapse"]
    mid = frames[int((COLLAPSE_START_S + COLLAPSE_FOR_S / 2) / STEP_S) - 1]
    view = next(n for n in mid.nodes if n.name == node)
    [verdict] = [v for v in view.verdicts if v.kind == ACCEPTANCE_DROP]
    assert verdict.detail.startswith("draft acceptance 3")  # ~30 % against ~70 %
    assert "drafting method not served, 3 draft tokens" in verdict.detail
    assert verdict.usd_per_hour_at_stake is not None and verdict.usd_per_hour_at_stake > 0
    assert f"${verdict.usd_per_hour_at_stake:,.2f}/h of its ${view.cost_per_hour_usd:,.2f}/h lost" in verdict.detail
    assert view.engine is not None and view.engine.acceptance_by_position is not None
    positions = [p for p in view.engine.acceptance_by_position if p is not None]
    assert len(positions) == 3 and positions == sorted(positions, reverse=True)
    assert verdict.trend is not None and verdict.trend.points[-1].at <= T0 + COLLAPSE_START_S + COLLAPSE_FOR_S
