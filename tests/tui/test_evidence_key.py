"""One key on a straggler verdict opens its evidence (issue 35): `e` on the hunt list's
straggler row shows each figure beside the pool's median, most telling first, as the
monitor ranked them (tests/monitor/test_straggler_evidence.py judges them)."""

from __future__ import annotations

from infertop.monitor.snapshot import EvidenceView
from infertop.tui.evidence_screen import EvidenceScreen
from infertop.tui.hunt_list import HuntList, detail_text
from tests.support.tui_helpers import wait_for
from tests.tui.test_hunt_list import HuntApp, snapshot, verdict


async def test_e_on_a_straggler_opens_its_ranked_evidence() -> None:
    straggler = verdict("straggler", "warning", 200.0, detail="18.0 decode steps/s, 60 % of the decode median")
    straggler = straggler.model_copy(update={"evidence": [
        EvidenceView(figure="GPUs power-capped", unit="GPUs", value=1.0, median=0.0, off=1.0),
        EvidenceView(figure="slowest SM clock", unit="MHz", value=1110.0, median=1965.0, off=0.435),
        EvidenceView(figure="NIC errors", unit="/s", value=0.0, median=0.0, off=0.0),
    ]})
    app = HuntApp()
    async with app.run_test(size=(140, 30)) as pilot:
        table = app.query_one(HuntList)
        frame = snapshot({"decode-01": [verdict("idle", "warning", 10.0)], "decode-03": [straggler]})
        table.show(frame)
        await pilot.pause()
        table.focus()
        # on the idle row, `e` opens too (every kind, issue 46): a verdict without figures
        # says its line is the whole evidence
        table.move_cursor(row=table.entries.index(("decode-01", "idle")))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen))
        assert "the line above is the whole evidence" in app.screen.text.plain  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, EvidenceScreen))
        table.move_cursor(row=table.entries.index(("decode-03", "straggler")))
        node, shown = table.pairs[table.current_key()]  # type: ignore[index]
        assert "(e: evidence against the pool)" in detail_text(node, shown, 0.0).plain
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EvidenceScreen))
        text = app.screen.text.plain  # type: ignore[attr-defined]
        lines = [line for line in text.splitlines() if line.strip()]
        first = next(i for i, line in enumerate(lines) if line.startswith("GPUs power-capped"))
        assert lines[first].split() == ["GPUs", "power-capped", "1", "0", "100", "%"]  # "1", not "1 GPUs"
        assert lines[first + 1].split() == ["slowest", "SM", "clock", "1,110", "MHz", "1,965", "MHz", "44", "%"]
        assert lines[first + 2].startswith("NIC errors")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, EvidenceScreen))


def test_an_off_against_a_zero_baseline_is_said_in_words() -> None:
    from infertop.tui.evidence_screen import _off_text

    # 2,000,000 xmit_wait/s against a pool at 0/s: not "199873946 %"
    assert _off_text(1_998_739.0) == "≫ pool"
    assert _off_text(0.435) == "44 %" and _off_text(12.5) == "1,250 %" and _off_text(None) == ""
