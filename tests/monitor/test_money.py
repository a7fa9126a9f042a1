"""Exact money arithmetic: rates, spend, budget, the API-equivalent and its peak windows."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertop.layouts.model import ApiPriceTable, NodeConfig, PricingConfig
from infertop.monitor.evaluation.api_price import BUNDLED, api_cost, is_peak, peak_seconds, peak_share
from infertop.monitor.evaluation.ledger import SessionLedger, TickFigures
from infertop.monitor.evaluation.money import (
    break_even_ratio,
    budget_figures,
    budget_label,
    budget_status,
    cluster_cost_per_hour_usd,
    cost_weighted_idle_fraction,
    energy_cost_per_hour_usd,
    node_cost_per_hour_usd,
    usd_per_million,
)

EPS = 1e-9
H = 3600.0


def utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()


MONDAY = utc(2026, 11, 30)  # 2026-11-30 is a Monday
FRIDAY = utc(2026, 11, 27)
SATURDAY = utc(2026, 11, 28)
SUNDAY = utc(2026, 11, 29)


def test_deepinfer_worked_example() -> None:
    """DeepInfer's own: $200/h for 3 h is $600; 1,000 acceptable tasks → $0.60 a task.
    Checked against the ledger that bills a session, tick by tick."""
    ledger = SessionLedger(started_at=MONDAY, acceptable_tasks=1000)
    for minute in range(0, 181):
        ledger.advance(TickFigures(now=MONDAY + minute * 60.0, cost_per_hour_usd=200.0))
    view = ledger.view(MONDAY + 3 * H, None)
    assert view.spend_usd == pytest.approx(600.0, abs=EPS)
    assert view.usd_per_acceptable_task == pytest.approx(0.60, abs=EPS)


def test_per_gpu_per_node_and_extras() -> None:
    pricing = PricingConfig(gpu_hour_usd=10.582, extras_hour_usd=12.5)
    eight = NodeConfig(name="d1", gpus=8)
    assert node_cost_per_hour_usd(eight, pricing, None) == pytest.approx(84.656, abs=EPS)
    # GPUs seen stand in when the layout gives no count; unknown when neither is known
    unknown_count = NodeConfig(name="d2")
    assert node_cost_per_hour_usd(unknown_count, pricing, 4) == pytest.approx(42.328, abs=EPS)
    assert node_cost_per_hour_usd(unknown_count, pricing, None) is None
    # a per-node rate wins over the cluster's per-GPU rate, a node's own per-GPU rate over both
    per_node = NodeConfig(name="p1", gpus=8, node_hour_usd=70.0)
    assert node_cost_per_hour_usd(per_node, pricing, 8) == 70.0
    own_gpu = NodeConfig(name="p2", gpus=8, node_hour_usd=70.0, gpu_hour_usd=9.0)
    assert node_cost_per_hour_usd(own_gpu, pricing, 8) == 72.0
    node_rate = PricingConfig(node_hour_usd=50.0, extras_hour_usd=3.0)
    assert node_cost_per_hour_usd(eight, node_rate, 8) == 50.0
    total = cluster_cost_per_hour_usd([84.656, 70.0, None], pricing)
    assert total == pytest.approx(84.656 + 70.0 + 12.5, abs=EPS)
    assert cluster_cost_per_hour_usd([None], PricingConfig()) is None
    assert cluster_cost_per_hour_usd([], PricingConfig(extras_hour_usd=2.0)) == 2.0


def test_owned_energy_and_amortised_hardware() -> None:
    pricing = PricingConfig(
        mode="owned", hardware_hour_usd=20.0, host_base_power_w=1000.0, pue=1.3, kwh_usd=0.12
    )
    node = NodeConfig(name="o1", gpus=8)
    gpu_power_w = 8 * 700.0
    # (5.6 kW + 1.0 kW) × 1.3 × $0.12/kWh = $1.0296/h
    assert energy_cost_per_hour_usd(gpu_power_w, 1000.0, 1.3, 0.12) == pytest.approx(1.0296, abs=EPS)
    energy = node_cost_per_hour_usd(node, pricing, 8, gpu_power_w)
    assert energy == pytest.approx(1.0296, abs=EPS)
    assert cluster_cost_per_hour_usd([energy], pricing) == pytest.approx(21.0296, abs=EPS)


@pytest.mark.parametrize(
    ("t", "peak"),
    [
        (MONDAY + 0.999 * H, False),
        (MONDAY + 1 * H, True),  # 01:00 opens the first window
        (MONDAY + 4 * H - 1e-3, True),
        (MONDAY + 4 * H, False),  # 04:00 closes it
        (MONDAY + 5 * H, False),
        (MONDAY + 6 * H, True),  # 06:00 opens the second
        (MONDAY + 10 * H - 1e-3, True),
        (MONDAY + 10 * H, False),  # 10:00 closes it
        (FRIDAY + 2 * H, True),
        (SATURDAY + 2 * H, False),  # weekends are off-peak all day
        (SUNDAY + 7 * H, False),
    ],
)
def test_peak_boundaries(t: float, peak: bool) -> None:
    assert is_peak(t) is peak


@pytest.mark.parametrize(
    ("t0", "t1", "peak_s"),
    [
        (MONDAY + 0.5 * H, MONDAY + 11 * H, 7 * H),  # straddles all four boundaries
        (MONDAY + 3.5 * H, MONDAY + 6.5 * H, 1 * H),  # 03:30–04:00 and 06:00–06:30
        (MONDAY + 1 * H, MONDAY + 4 * H, 3 * H),  # exactly one window
        (FRIDAY + 9 * H, SATURDAY + 3 * H, 1 * H),  # Friday 09–10 counts, Saturday does not
        (SUNDAY + 23 * H, MONDAY + 2 * H, 1 * H),  # Monday 01–02 counts, Sunday does not
        (SATURDAY, MONDAY, 0.0),
        (MONDAY, MONDAY + 7 * 24 * H, 5 * 7 * H),  # a week: five weekdays × 7 h
    ],
)
def test_peak_seconds_straddle(t0: float, t1: float, peak_s: float) -> None:
    assert peak_seconds(t0, t1) == pytest.approx(peak_s, abs=1e-6)


def test_api_cost_splits_exactly_at_boundaries() -> None:
    # 1M output tokens over Monday 00:30–11:00: 7 h of 10.5 h at peak
    # → 2/3 × $1.20 + 1/3 × $0.60 = $1.00
    cost = api_cost(MONDAY + 0.5 * H, MONDAY + 11 * H, 1_000_000)
    assert cost.output_usd == pytest.approx(1.0, abs=EPS)
    assert cost.output_usd + cost.input_cache_hit_usd + cost.input_cache_miss_usd == pytest.approx(1.0, abs=EPS)
    # all peak, all off-peak
    assert api_cost(MONDAY + 7 * H, MONDAY + 8 * H, 1e6).output_usd == pytest.approx(1.2, abs=EPS)
    assert api_cost(SATURDAY + 7 * H, SATURDAY + 8 * H, 1e6).output_usd == pytest.approx(0.6, abs=EPS)


def test_api_cost_prompt_cache_split() -> None:
    off = (SATURDAY + H, SATURDAY + 2 * H)
    cost = api_cost(*off, output_tokens=0, prompt_tokens=1e6, prompt_cached_tokens=4e5)
    assert cost.input_cache_hit_usd == pytest.approx(0.4 * 0.003, abs=EPS)
    assert cost.input_cache_miss_usd == pytest.approx(0.6 * 0.15, abs=EPS)
    # no cache counter: all billed as miss
    blind = api_cost(*off, output_tokens=0, prompt_tokens=1e6, prompt_cached_tokens=None)
    assert blind.input_cache_hit_usd == 0.0
    assert blind.input_cache_miss_usd == pytest.approx(0.15, abs=EPS)
    peak = api_cost(MONDAY + 2 * H, MONDAY + 3 * H, 0, 1e6, 1e6)
    assert peak.input_cache_hit_usd == pytest.approx(0.006, abs=EPS)


def test_price_table_overridable() -> None:
    table = ApiPriceTable(model="custom", as_of="2027-01", output_offpeak=1.0, output_peak=3.0)
    assert table != BUNDLED
    assert api_cost(SUNDAY, SUNDAY + H, 2e6, table=table).output_usd == pytest.approx(2.0, abs=EPS)


@given(
    st.floats(min_value=MONDAY - 10 * 86400, max_value=MONDAY + 10 * 86400),
    st.floats(min_value=0, max_value=3 * 86400),
    st.floats(min_value=0, max_value=3 * 86400),
)
def test_peak_seconds_additive(t0: float, a: float, b: float) -> None:
    # splitting an interval anywhere never changes its peak seconds
    whole = peak_seconds(t0, t0 + a + b)
    assert whole == pytest.approx(peak_seconds(t0, t0 + a) + peak_seconds(t0 + a, t0 + a + b), abs=1e-5)
    assert 0.0 <= peak_share(t0, t0 + a + b) <= 1.0


def test_budget_alerts_and_projection() -> None:
    used, left, alert = budget_status(100.0, 600.0, 200.0)
    assert (used, left, alert) == (pytest.approx(1 / 6), pytest.approx(500 / 200 * H), None)
    used, left, alert = budget_status(480.0, 600.0, 200.0)
    assert used == pytest.approx(0.8, abs=EPS) and alert == "80%"
    assert left == pytest.approx(0.6 * H, abs=1e-6)
    assert budget_status(479.99, 600.0, 200.0)[2] is None
    # once spent nothing "runs out in 0m00s" any more: the time left is no longer a figure
    assert budget_status(600.0, 600.0, 200.0) == (1.0, None, "100%")
    assert budget_status(700.0, 600.0, 200.0) == (pytest.approx(7 / 6), None, "100%")
    assert budget_status(700.0, 600.0, 0.0)[2] == "100%"
    assert budget_status(100.0, 600.0, None) == (pytest.approx(1 / 6), None, None)
    assert budget_status(None, 600.0, 200.0) == (None, None, None)
    assert budget_status(100.0, None, 200.0) == (None, None, None)


def test_per_unit_and_break_even() -> None:
    assert usd_per_million(600.0, 3e6) == pytest.approx(200.0, abs=EPS)
    assert usd_per_million(600.0, 0.0) is None
    assert usd_per_million(None, 1e6) is None
    assert break_even_ratio(600.0, 150.0) == pytest.approx(4.0, abs=EPS)
    assert break_even_ratio(600.0, 0.0) is None


def test_cost_weighted_idle() -> None:
    # a $100/h node fully idle and a $300/h node busy: a quarter of the bill sits idle
    assert cost_weighted_idle_fraction([(100.0, 1.0), (300.0, 0.0)]) == pytest.approx(0.25)
    assert cost_weighted_idle_fraction([(100.0, None), (None, 0.5)]) is None
    assert cost_weighted_idle_fraction([(0.0, 0.5), (0.0, 1.0)]) == pytest.approx(0.75)


def test_usd_per_million_at_rate() -> None:
    from infertop.monitor.evaluation.money import usd_per_million_at_rate

    # $36/h at 10 tokens/s = 36,000 tokens/h → $1,000 per 1M tokens
    assert usd_per_million_at_rate(36.0, 10.0) == pytest.approx(1000.0, rel=1e-12)
    assert usd_per_million_at_rate(36.0, 0.0) is None
    assert usd_per_million_at_rate(None, 10.0) is None


def test_budget_words_one_figure() -> None:
    """The share is rounded down (99.6 % is "99%", never "100%" before the budget is
    reached); past the budget the words say by how much."""
    assert budget_label(597.6, 600.0) == "99% of $600"
    assert budget_label(582.0, 600.0) == "97% of $600"
    assert budget_label(600.0, 600.0) == "spent: $600"
    assert budget_label(612.4, 600.0) == "over by $12.40 of $600"
    assert budget_label(None, 600.0) is None and budget_label(1.0, None) is None
    over = budget_figures(612.4, 600.0, 200.0, now=0.0)
    assert over.exhausted_in_s is None and over.over_by_usd == pytest.approx(12.4)
    assert over.alert == "100%" and over.label == "over by $12.40 of $600"
    under = budget_figures(597.6, 600.0, 200.0, now=0.0)
    assert under.exhausted_in_s == pytest.approx(2.4 / 200.0 * H) and under.over_by_usd is None


def test_spend_projected_to_the_reservation_end() -> None:
    # $400 spent, $200/h, 1 h 30 m left: $700 at the end, beyond a $600 budget
    fig = budget_figures(400.0, 600.0, 200.0, now=MONDAY, ends_at=MONDAY + 1.5 * H)
    assert fig.projected_spend_usd == pytest.approx(700.0, abs=EPS)
    assert fig.holds is False
    fig = budget_figures(400.0, 800.0, 200.0, now=MONDAY, ends_at=MONDAY + 1.5 * H)
    assert fig.holds is True
    # after the end the spend is the total; without an end or a rate there is no projection
    assert budget_figures(400.0, 600.0, 200.0, now=MONDAY, ends_at=MONDAY - 1).projected_spend_usd == 400.0
    assert budget_figures(400.0, 600.0, 200.0, now=MONDAY).projected_spend_usd is None
    assert budget_figures(400.0, None, None, now=MONDAY, ends_at=MONDAY + H).projected_spend_usd is None
    assert budget_figures(400.0, None, 100.0, now=MONDAY, ends_at=MONDAY + H).holds is None


def test_ledger_projects_from_the_layout_end() -> None:
    from infertop.layouts import parse_layout

    layout = parse_layout(
        '[session]\nreservation_start = "2026-11-30T00:00:00Z"\nduration_h = 3\nbudget_usd = 600\n'
        '[[nodes]]\nname = "d1"\n'  # a layout must list what it watches
    )
    ledger = SessionLedger.for_layout(layout, MONDAY)
    ledger.advance(TickFigures(now=MONDAY + H, cost_per_hour_usd=250.0))
    view = ledger.view(MONDAY + H)
    assert view.reservation_end == "2026-11-30T03:00:00+00:00"
    assert view.projected_spend_usd == pytest.approx(750.0, abs=EPS)
    assert view.budget_holds is False and view.budget_label == "41% of $600"


SEED_LAYOUT = (
    '[session]\nreservation_start = "2026-11-28T00:00:00Z"\n[pricing]\ngpu_hour_usd = 10.582\n'
    '[[nodes]]\nhosts = "d-[01-16]"\ngpus = 8\n'
)


@pytest.mark.parametrize(
    ("at", "window", "needed", "flips"),
    [
        # Saturday noon: off-peak ($0.60/1M) until Monday 01:00 UTC
        (SATURDAY + 12 * H, "off-peak", 627_081, "2026-11-30T01:00:00+00:00"),
        # Monday 02:00: peak ($1.20/1M) until 04:00; Monday 05:00: off-peak until 06:00
        (MONDAY + 2 * H, "peak", 313_541, "2026-11-30T04:00:00+00:00"),
        (MONDAY + 5 * H, "off-peak", 627_081, "2026-11-30T06:00:00+00:00"),
        (FRIDAY + 9.5 * H, "peak", 313_541, "2026-11-27T10:00:00+00:00"),
        (FRIDAY + 10 * H, "off-peak", 627_081, "2026-11-30T01:00:00+00:00"),
    ],
)
def test_breakeven_reproduces_the_seed(at: float, window: str, needed: int, flips: str) -> None:
    """128 GPUs at $10.582 → $1,354.50/h → 627,081 output tok/s off-peak, 313,541 at
    peak; "$32,508 a day buys 54.2 billion output tokens off-peak"."""
    from infertop.layouts import parse_layout
    from infertop.monitor.monitor import Monitor
    from infertop.tui.session_panel import breakeven_lines

    monitor = Monitor(parse_layout(SEED_LAYOUT), sources=[], clock=lambda: at)
    s = monitor.tick(at).session
    assert f"{s.cost_per_hour_usd:,.2f}" == "1,354.50"
    assert s.breakeven_output_tokens_per_s is not None
    assert round(s.breakeven_output_tokens_per_s) == needed
    assert s.price_window == window and s.price_window_flips_at == flips
    text = "\n".join(line.plain for line in breakeven_lines(s))
    assert f"break-even {needed:,} output tok/s  {window}" in text
    if window == "off-peak":
        assert "$32,508 a day buys 54.2 billion output tokens off-peak" in text
    assert monitor.tick(at).to_json_dict()["session"]["breakeven_output_tokens_per_s"] == pytest.approx(
        s.breakeven_output_tokens_per_s
    )
