"""Counter → rate, including resets, with properties checked by hypothesis."""

from __future__ import annotations

from infertop.collectors.rates import (
    CounterTrust,
    checked_counter_rate,
    counter_rate,
    ratio,
    step_doubt,
)


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


TRUST = CounterTrust(max_per_s=100.0, reset_repeat_s=60.0)


def test_trusted_counters_keep_prometheus_semantics() -> None:
    # one restart, counting up from a value it could have reached since: as before
    points = [(0.0, 100.0), (10.0, 150.0), (20.0, 30.0), (30.0, 80.0)]
    assert checked_counter_rate(points, TRUST) == (130.0 / 30.0, None)


def test_a_rise_faster_than_the_limit_is_not_trusted() -> None:
    rate, doubt = checked_counter_rate([(0.0, 100.0), (1.0, 1e18), (2.0, 1e18 + 1)], TRUST)
    assert rate is None and doubt is not None and "faster than 100/s" in doubt
    assert counter_rate([(0.0, 100.0), (1.0, 1e18)]) is not None  # without trust: Prometheus


def test_a_reset_to_a_value_it_could_not_have_counted_is_not_trusted() -> None:
    rate, doubt = checked_counter_rate([(0.0, 1.3e9), (1.0, 1.3e9 - 1000)], TRUST)
    assert rate is None and doubt is not None and "restarted at 1.3e+09" in doubt


def test_a_counter_that_resets_twice_within_a_minute_is_not_trusted() -> None:
    points = [(0.0, 500.0), (1.0, 50.0), (2.0, 90.0), (3.0, 40.0)]
    rate, doubt = checked_counter_rate(points, TRUST)
    assert rate is None and doubt is not None and "went down twice" in doubt
    # a minute apart, two restarts are two restarts
    points = [(0.0, 500.0), (1.0, 50.0), (70.0, 90.0), (71.0, 40.0)]
    assert checked_counter_rate(points, TRUST) == ((50 + 40 + 40) / 71.0, None)


def test_step_doubt_with_time_going_backwards_allows_no_rise() -> None:
    assert step_doubt(10.0, 5.0, 9.0, 5.0, TRUST, None) is None
    assert step_doubt(10.0, 5.0, 9.0, 6.0, TRUST, None) is not None
