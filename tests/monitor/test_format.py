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


# -- the one rule for fitting a figure into a cell -----------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from infertop.monitor.format import figure_forms, fit_figure, fmt_pool, fmt_si  # noqa: E402


@pytest.mark.parametrize(
    ("value", "digits", "unit", "money", "width", "shown"),
    [
        (84.66, 2, "", True, 9, "$84.66"),
        (84.66, 2, "", True, 5, "$84.7"),
        (84.66, 2, "", True, 3, "$85"),
        (84.66, 2, "", True, 2, None),  # "$8" would be a different figure: the column goes
        (1354.50, 2, "", True, 9, "$1,354.50"),
        (1354.50, 2, "", True, 6, "$1,354"),
        (1354.50, 2, "", True, 5, "$1.4k"),
        (1354.50, 2, "", True, 4, None),  # "$1k" keeps one digit: not offered
        (5400, 0, "/s", False, 7, "5,400/s"),
        (5400, 0, "/s", False, 6, "5.4k/s"),
        (2_000_000, 0, "/s", False, 6, "2.0M/s"),
        (95_032, 0, "", False, 5, "95.0k"),
        (95_032, 0, "", False, 3, "95k"),
        (999_960, 0, "", False, 4, "1.0M"),
        (0.0297, 4, "", True, 6, "$0.030"),
        (0.0297, 4, "", True, 5, None),  # "$0.03" keeps one digit, "$0" none
        (8, 0, "", False, 1, "8"),  # exact: as short as it gets
        (0, 1, "", False, 1, "0"),
        (-3.5, 1, "", True, 5, "-$3.5"),
        (None, 1, "", False, 1, "—"),
    ],
)
def test_fit_figure(value: float | None, digits: int, unit: str, money: bool, width: int,
                    shown: str | None) -> None:
    assert fit_figure(value, width, digits, unit, money) == shown


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [(5400, "/s", "5.4k/s"), (2e6, "/s", "2.0M/s"), (32.9, "/s", "32.9/s"), (0.05, "/s", "0.05/s"),
     (0.0012, "", "0.001"), (123_456, "", "123k"), (999.96, "", "1.0k"), (0, "", "0.0"), (None, "", "—"),
     (1e20, "", "100E")],
)
def test_fmt_si(value: float | None, unit: str, shown: str) -> None:
    assert fmt_si(value, unit) == shown


@pytest.mark.parametrize(
    ("median", "shown"),
    [(801.0, "pool 801.0/s"), (0.02, "pool 0.02/s"), (2e6, "pool 2.0M/s"), (0.0, "pool quiet"),
     (None, "no pool baseline")],
)
def test_fmt_pool_never_writes_a_zero_baseline(median: float | None, shown: str) -> None:
    assert fmt_pool(median, "/s") == shown


_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def parse_figure(text: str) -> tuple[float, float]:
    """A drawn figure read back: (value, half its last digit's step) — the precision shown."""
    number = text.replace("$", "").replace(",", "").rstrip("/s")
    scale = _SI.get(number[-1], 1.0) if number and number[-1].isalpha() else 1.0
    if number and number[-1].isalpha():
        number = number[:-1]
    decimals = len(number.partition(".")[2])
    return float(number) * scale, 0.5 * 10 ** -decimals * scale


@given(st.floats(min_value=-1e17, max_value=1e17, allow_nan=False), st.integers(0, 3), st.booleans())
def test_every_form_is_the_figure_at_its_precision(value: float, digits: int, money: bool) -> None:
    for form in figure_forms(value, digits, "/s", money):
        assert "e" not in form.lower().replace("/s", "")  # never scientific
        parsed, half_step = parse_figure(form.lstrip("-"))
        assert abs(parsed - abs(value)) <= half_step * 1.0001 + 1e-9, (value, form)
    assert "e+" not in fmt_si(value) and "e-" not in fmt_si(value)


from infertop.monitor.format import detail_forms, fmt_exact, fmt_latency, fmt_num, fmt_pct, fmt_usd  # noqa: E402


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (400.0, " Gb/s", "400 Gb/s"), (2.5, "", "2.5"), (25, "", "25"), (0.125, "", "0.125"),
    (1_000_000.0, " s", "1,000,000 s"), (None, "", "—"), (-3.0, "", "-3"),
])
def test_fmt_exact_writes_a_rated_figure_exactly(value: float | None, unit: str, shown: str) -> None:
    assert fmt_exact(value, unit) == shown


@pytest.mark.parametrize(("value_s", "bounds", "shown"), [
    (0.038, (0.025, 0.05), "38 ms (25–50)"), (12_345.6, None, "12,346 s"),
    (0.0000004, None, "0.0004 ms"), (80.0, (80.0, None), "> 80 s"),
])
def test_fmt_latency_is_never_scientific(value_s: float, bounds: tuple[float, float | None] | None,
                                         shown: str) -> None:
    assert fmt_latency(value_s, bounds) == shown


def test_full_figures_are_the_rules_most_precise_form() -> None:
    """fmt_num, fmt_usd and fmt_pct are the one rule's first form, not a second format."""
    for value in (5400.0, -3.0, 0.04, 84.66, 1_354.5, 2e6):
        assert fmt_num(value, 1, "/s") == figure_forms(value, 1, "/s")[0]
        assert fmt_usd(value) == figure_forms(value, 2, money=True)[0]
    assert fmt_usd(-3.0) == "-$3.00" and fmt_pct(0.153, 1) == "15.3%" and fmt_pct(12.5) == "1250%"
    assert "e+" not in " ".join(detail_forms(3, 1250, 1e6))
