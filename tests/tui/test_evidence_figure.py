"""An evidence row's figure as drawn (`evidence_screen._figure`): the unit once, a small
figure with its first digit (issue 46's drill drew the pool's 0.018 s KV transfers "0.0",
and dropped the unit "s" for being a letter of "transfer")."""

from __future__ import annotations

import pytest

from infertop.tui.evidence_screen import _figure


@pytest.mark.parametrize(
    ("value", "unit", "figure", "drawn"),
    [(0.42, "s", "KV transfer mean", "0.4 s"), (0.018, "s", "KV transfer mean", "0.02 s"),
     (16.2, "/s", "decode steps/s", "16.2"), (1, "GPUs", "GPUs power-capped", "1"),
     (0.2, "/s", "NIC errors", "0.2/s"), (1035, "MHz", "GPU 5 SM clock", "1,035 MHz"),
     (2.5, "%", "GPU 6 SM active", "2.5 %"), (None, "s", "KV transfer mean", "—")],
)
def test_an_evidence_figure_is_drawn_with_its_unit_once_and_its_first_digit(
        value: float | None, unit: str, figure: str, drawn: str) -> None:
    assert _figure(value, unit, figure) == drawn
