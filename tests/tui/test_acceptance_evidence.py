"""`e` on an acceptance-drop row (issue 43): the acceptance beside its pool's and its own
level, per draft position, and the acceptance over time — drawn from what the monitor
judged (a real Monitor fed a collapse, tests/monitor/test_acceptance_drop.py)."""

from __future__ import annotations

from infertop.layouts import parse_layout
from infertop.monitor.evaluation.conditions import ACCEPTANCE_DROP
from infertop.monitor.monitor import Monitor
from infertop.tui.evidence_screen import EvidenceScreen
from infertop.tui.hunt_list import HuntList
from tests.monitor.test_acceptance_drop import T0, layout, run, wander
from tests.support.tui_helpers import wait_for
from tests.tui.test_hunt_list import HuntApp


async def test_e_on_an_acceptance_drop_shows_its_figures_and_its_fall_over_time() -> None:
    monitor = Monitor(parse_layout(layout(4)), sources=[], clock=lambda: T0)
    acceptance = {"d1": [wander(1)], "d2": [wander(2)], "d4": [wander(4)],
                  "d3": [lambda t: 0.8 if t < 60 else 0.4]}
    frame = run(monitor, acceptance, 100.0)
    app = HuntApp()
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.query_one(HuntList)
        table.show(frame)
        await pilot.pause()
        table.focus()
        table.move_cursor(row=table.entries.index(("d3", ACCEPTANCE_DROP)))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen))
        text = app.screen.text.plain  # type: ignore[attr-defined]
        assert text.startswith("acceptance-drop evidence: d3")
        lines = text.splitlines()
        row = next(line for line in lines if line.startswith("draft acceptance "))
        assert row.split()[2:4] == ["40", "%"]
        assert any(line.startswith("accepted at draft position 3") for line in lines)
        over_time = lines.index(next(line for line in lines if line.startswith("draft acceptance over the last")))
        assert "one point per 10 s" in lines[over_time]
        assert lines[over_time + 2].startswith("from 80 % to 40 %, lowest 40 %; pool median")
