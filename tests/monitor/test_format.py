"""Human formatting shared by the TUI, the text table and the report."""

from __future__ import annotations

import pytest

from infertop.monitor.format import fmt_duration, fmt_span


@pytest.mark.parametrize(
    ("seconds", "compact", "precise"),
    [
        (None, "—", "—"),
        (0, "0m00s", "0m00s"),
        (67, "1m07s", "1m07s"),
        (7505, "2h05m", "2h05m05s"),
        (93784, "1d02h", "26h03m04s"),
    ],
)
def test_fmt_span(seconds: float | None, compact: str, precise: str) -> None:
    assert fmt_span(seconds) == compact
    assert fmt_span(seconds, precise=True) == precise


def test_fmt_duration_is_a_clock() -> None:
    assert fmt_duration(7505.9) == "2:05:05"
    assert fmt_duration(None) == "—"
