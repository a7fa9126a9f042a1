"""The collapsing demo node found from the hunt list in one key (issue 43): from a cold
start of the 16-node demo, once decode-04's acceptance has collapsed, the hunt list shows
its verdict under a number and that one digit opens its evidence — whatever has the focus,
whichever row it sits on. The frames come from the demo's realistic pages through the real
parsers and the monitor's intake (tests/cli/test_demo_pd_trouble.run_demo)."""

from __future__ import annotations

import re

from infertop.demo.scenario import COLLAPSE_START_S, trouble_nodes
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.conditions import ACCEPTANCE_DROP
from infertop.monitor.snapshot import Snapshot
from infertop.tui.app import InfertopApp
from infertop.tui.evidence_screen import EvidenceScreen
from infertop.tui.help_screen import help_table
from infertop.tui.hunt_list import HuntList
from infertop.tui.node_table import NodeTable
from tests.cli.test_demo_pd_trouble import run_demo
from tests.support.tui_helpers import screen_text, wait_for

STEP_S = 5.0
NODES = 16


class DemoFrames:
    """A feed that hands the app the demo's frames up to now, as a running monitor would."""

    # the app reads the bell's settings off the layout: the default (no bell)
    layout = parse_layout('[[nodes]]\nname = "decode-04"\nrole = "decode"\n')

    def __init__(self, frames: list[Snapshot]) -> None:
        self.frames = frames

    async def start(self, publish) -> None:  # type: ignore[no-untyped-def]
        for frame in self.frames:
            publish(frame)

    async def stop(self) -> None:
        pass


def collapsed_frames() -> list[Snapshot]:
    """From the demo's start to the first frame that flags the collapse."""
    node = trouble_nodes(NODES)["acceptance_collapse"]
    _, frames = run_demo(int((COLLAPSE_START_S + 40.0) / STEP_S), step_s=STEP_S, window_s=10.0, nodes=NODES)
    flagged = next(i for i, f in enumerate(frames) for n in f.nodes
                   if n.name == node and any(v.kind == ACCEPTANCE_DROP for v in n.verdicts))
    return frames[: flagged + 1]


async def test_one_digit_from_a_cold_start_opens_the_collapse_evidence() -> None:
    node = trouble_nodes(NODES)["acceptance_collapse"]
    assert node == "decode-04"
    app = InfertopApp(DemoFrames(collapsed_frames()))  # type: ignore[arg-type]
    async with app.run_test(size=(120, 36)) as pilot:
        hunt = app.screen.query_one(HuntList)
        await wait_for(pilot, lambda: (node, ACCEPTANCE_DROP) in hunt.entries)
        # the screen as a new user sees it: no key pressed, the node table has the focus
        assert isinstance(app.focused, NodeTable)
        def hunt_row() -> str | None:
            return next((line for line in screen_text(app).splitlines()
                         if node in line and ACCEPTANCE_DROP in line and "│" in line), None)

        await wait_for(pilot, lambda: hunt_row() is not None)
        row = hunt_row() or ""
        # the hunt list's row (the node table has a row for decode-04 too, unnumbered)
        number = re.search(r"│\s*(\d)\s+(?:\w+\s+)?" + node, row)  # SEV may be left out
        assert number is not None, row
        assert hunt.entries.index((node, ACCEPTANCE_DROP)) == int(number.group(1)) - 1
        assert int(number.group(1)) > 1  # not the top row: the digit reaches any of the first 9
        await pilot.press(number.group(1))
        await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen))
        text = app.screen.text.plain  # type: ignore[attr-defined]
        assert text.startswith(f"{ACCEPTANCE_DROP} evidence: {node}")
        assert any(line.startswith("draft acceptance over the last") for line in text.splitlines())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, EvidenceScreen))
        # the cursor stayed on the row the digit chose: its evidence in full under the list
        assert hunt.current() == (node, ACCEPTANCE_DROP)
        # `?` says the nine keys once
        keys = help_table(app.help_scopes(app.screen), app.COMMAND_PALETTE_BINDING)
        listed = [row for row in keys.columns[1].cells if str(row) == "1–9"]
        assert len(listed) == 1
