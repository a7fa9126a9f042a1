"""Counter → rate, including resets, with properties checked by hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from collectors.rates import counter_increase, counter_rate, ratio


def test_rate_simple() -> None:
    assert counter_rate([(0.0, 100.0), (10.0, 200.0)]) == 10.0


def test_rate_across_reset() -> None:
    # 100 → 150 (+50), restart, counts 0 → 30 (+30), then → 80 (+50): 130 over 30 s
    points = [(0.0, 100.0), (10.0, 150.0), (20.0, 30.0), (30.0, 80.0)]
    assert counter_rate(points) == 130.0 / 30.0


def test_rate_unknown() -> None:
    assert counter_rate([]) is None
    assert counter_rate([(0.0, 1.0)]) is None
    assert counter_rate([(0.0, None), (1.0, 5.0)]) is None
    assert counter_rate([(1.0, 1.0), (1.0, 5.0)]) is None  # no time passed
    assert counter_rate([(0.0, 1.0), (1.0, None), (2.0, 5.0)]) == 2.0


def test_ratio() -> None:
    assert ratio(1.0, 4.0) == 0.25
    assert ratio(1.0, 0.0) is None
    assert ratio(None, 1.0) is None


@given(st.lists(st.floats(min_value=0, max_value=1e15, allow_nan=False), min_size=2, max_size=50))
def test_increase_never_negative(values: list[float]) -> None:
    inc = counter_increase(values)
    assert inc is not None and inc >= 0


@given(st.lists(st.floats(min_value=0, max_value=1e12, allow_nan=False), min_size=2, max_size=50))
def test_increase_of_monotonic_is_last_minus_first(values: list[float]) -> None:
    values = sorted(values)
    inc = counter_increase(values)
    assert inc is not None
    assert abs(inc - (values[-1] - values[0])) <= 1e-6 * max(1.0, values[-1])
