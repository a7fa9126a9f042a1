"""Wall-clock cadence: readings at whole multiples of the interval, ticks half-way between."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.cadence import delay_to_boundary


@pytest.mark.parametrize(
    ("interval", "now", "offset", "min_delay", "expected"),
    [
        (1.0, 100.25, 0.0, 0.0, 0.75),  # next whole second
        (1.0, 100.25, 0.5, 0.0, 0.25),  # next half second
        (1.0, 100.75, 0.5, 0.0, 0.75),
        (5.0, 12.0, 0.0, 0.0, 3.0),
        (1.0, 100.98, 0.0, 0.05, 1.02),  # too close: the boundary after
    ],
)
def test_delay_to_boundary(interval: float, now: float, offset: float, min_delay: float, expected: float) -> None:
    assert delay_to_boundary(interval, now, offset, min_delay) == pytest.approx(expected)


@given(
    st.floats(min_value=0.1, max_value=60), st.floats(min_value=0, max_value=2e9),
    st.floats(min_value=0, max_value=1),
)
def test_lands_on_a_boundary(interval: float, now: float, phase: float) -> None:
    offset = phase * interval
    delay = delay_to_boundary(interval, now, offset, 0.0)
    assert 0 < delay <= interval + 1e-6
    landed = (now + delay - offset) / interval
    assert abs(landed - round(landed)) < 1e-4 * max(1.0, abs(landed))
