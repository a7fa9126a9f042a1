"""Energy: kWh over the session and joules per output token, from the GPUs' total-energy
counters (NVML, or dcgm-exporter's DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION in mJ)."""

from __future__ import annotations

import datetime as dt

import pytest

from infertop.collectors.pages.dcgm import gpu_samples_from_dcgm
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.evaluation.ledger import SessionLedger
from infertop.monitor.monitor import Monitor

START = dt.datetime(2026, 11, 28, tzinfo=dt.UTC).timestamp()
LAYOUT = """
[session]
reservation_start = "2026-11-28T00:00:00Z"
[pricing]
gpu_hour_usd = 10.0
[[nodes]]
name = "d1"
gpus = 8
[[nodes]]
name = "d2"
gpus = 8
"""
OWNED = """
[session]
reservation_start = "2026-11-28T00:00:00Z"
[pricing]
mode = "owned"
pue = 1.25
kwh_usd = 0.12
[[nodes]]
name = "d1"
"""


def gpu_sample(node: str, at: float, joules: float | None, source: str = "ssh",
               gen: float | None = None) -> NodeSample:
    return NodeSample(
        node=node, source=source, taken_at=at,
        gpus=[GpuSample(index=i, util_pct=90.0, power_w=700.0, energy_j_total=joules) for i in range(8)],
        engine=None if gen is None else EngineSample(generation_tokens_total=gen),
    )


def test_energy_per_session_and_per_output_token() -> None:
    """16 GPUs at 700 W for 10 s: 112 kJ (0.0311 kWh); 2,000 output tokens/s: 5.6 J each.
    d2 is read by NVML and DCGM both: counted once. NVML reads energy every 5th sample on d1."""
    t0 = START + 3600.0
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: t0)
    for step in range(11):
        at = t0 + step
        joules = 1e9 + 700.0 * step
        monitor.fleet.ingest(gpu_sample("d1", at, joules if step % 5 == 0 else None, gen=1000.0 * step))
        monitor.fleet.ingest(gpu_sample("d2", at, joules + 5e8, gen=1000.0 * step))
        monitor.fleet.ingest(gpu_sample("d2", at, joules + 5e8, source="scrape"))
        s = monitor.tick(at).session
    assert s.energy_kwh == pytest.approx(16 * 700.0 * 10 / 3.6e6, rel=1e-9)
    assert s.joules_per_output_token == pytest.approx(16 * 700.0 / 2000.0, rel=1e-9)
    assert s.energy_usd is None  # rented: the rent covers the energy
    from infertop.tui.history import SpendHistory
    from infertop.tui.session_panel import session_lines

    text = "\n".join(line.plain for line in session_lines(s, SpendHistory(), 10))
    assert "energy 0.031 kWh  per output token 5.60 J" in text
    data = monitor.tick(t0 + 10).to_json_dict()["session"]
    assert isinstance(data, dict) and data["energy_kwh"] == pytest.approx(s.energy_kwh)


def test_energy_unknown_without_counters_and_not_from_first_sight() -> None:
    t0 = START + 3600.0
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: t0)
    monitor.fleet.ingest(gpu_sample("d1", t0, None, gen=0.0))
    s = monitor.tick(t0).session
    assert s.energy_kwh is None and s.joules_per_output_token is None
    # the first reading holds energy since the driver loaded: it is not this session's
    monitor.fleet.ingest(gpu_sample("d1", t0 + 1, 5e9, gen=10.0))
    assert monitor.tick(t0 + 1).session.energy_kwh is None
    # a driver reload (counter down) counts from zero; a jump no GPU can draw is left out
    monitor.fleet.ingest(gpu_sample("d1", t0 + 2, 300.0, gen=20.0))
    monitor.fleet.ingest(gpu_sample("d1", t0 + 3, 1e12, gen=30.0))
    assert monitor.tick(t0 + 3).session.energy_kwh == pytest.approx(8 * 300.0 / 3.6e6)


def test_dcgm_energy_in_millijoules_counts() -> None:
    page = (
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"} %d\n'
    )
    first = gpu_samples_from_dcgm(parse_exposition(page % 5_000_000))
    second = gpu_samples_from_dcgm(parse_exposition(page % 5_700_000))  # +700 J
    assert first[0].energy_j_total == pytest.approx(5000.0)
    ledger = SessionLedger(started_at=START)
    ledger.energy.observe(NodeSample(node="d1", source="scrape", taken_at=START + 1, gpus=first))
    ledger.energy.observe(NodeSample(node="d1", source="scrape", taken_at=START + 2, gpus=second))
    assert ledger.energy.drain() == {"d1": pytest.approx(700.0)}


def test_owned_energy_dollars_from_the_counters() -> None:
    """Owned: the GPUs' energy is billed from their counters, not from the power gauge.
    The gauge says 700 W a GPU; the counters say 500 W drawn (the gauge is a sample, the
    counter the truth). The hour before infertop looked is billed at the gauge (nothing
    else is known of it), the watched seconds at the counted energy."""
    t0 = START + 3600.0
    monitor = Monitor(parse_layout(OWNED), sources=[], clock=lambda: t0)
    for step in range(11):
        # NVML reads the energy every 5th sample; the gauge every sample
        joules = 1e6 + 500.0 * step if step % 5 == 0 else None
        monitor.fleet.ingest(gpu_sample("d1", t0 + step, joules))
        s = monitor.tick(t0 + step).session
    price = 1.25 * 0.12  # $ per kWh at the meter
    kwh = 8 * 500.0 * 10 / 3.6e6
    assert s.energy_kwh == pytest.approx(kwh)
    assert s.energy_usd == pytest.approx(kwh * price)
    gauge_hour = 8 * 700.0 / 1000.0 * price  # the unwatched hour, at the gauge
    assert s.cost_per_hour_usd == pytest.approx(gauge_hour)
    # tick 0 charges the hour at the gauge; the 10 s after it, the counted 500 W
    assert s.spend_usd == pytest.approx(gauge_hour + kwh * price, rel=1e-12)
    assert s.spend_by_phase[0].spend_usd == pytest.approx(s.spend_usd, rel=1e-12)
    # the gauge's estimate would have been 700 W for those 10 s
    assert s.spend_usd < gauge_hour * (3600 + 10) / 3600 - 1e-6


def test_exporter_carries_energy_and_breakeven() -> None:
    from infertop.monitor.exporter import snapshot_families

    t0 = START + 3600.0
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: t0)
    for step in range(3):
        monitor.fleet.ingest(gpu_sample("d1", t0 + step, 1e9 + 700.0 * step, gen=1000.0 * step))
        snap = monitor.tick(t0 + step)
    values = {f.name: f.samples[0].value for f in snapshot_families(snap) if f.samples}
    assert values["infertop_session_energy_kwh"] == pytest.approx(8 * 700.0 * 2 / 3.6e6)
    assert values["infertop_session_joules_per_output_token"] == pytest.approx(8 * 700.0 / 1000.0)
    # $160/h off-peak ($0.60/1M): 160 / (0.6e-6 × 3600) output tokens/s
    assert values["infertop_session_breakeven_output_tokens_per_second"] == pytest.approx(
        160.0 / (0.6e-6 * 3600.0)
    )
