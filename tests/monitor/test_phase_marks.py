"""One way to mark a phase, whoever marks it: the TUI with or without a record, the demo,
`infertop phase`. Spend is split at the instant of the mark, never at the next tick."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.layouts import parse_layout
from infertop.monitor.feeds import MonitorFeed
from infertop.monitor.record.store import Recorder

LAYOUT = """
[cluster]
name = "phases"
interval_s = 10.0
[session]
reservation_start = "2026-12-01T00:00:00Z"
[pricing]
gpu_hour_usd = 36.0
[[nodes]]
name = "d1"
role = "decode"
gpus = 1
"""
T0 = 1_796_083_200.0  # 2026-12-01T00:00:00Z


@pytest.mark.parametrize("recorded", [False, True], ids=["no record", "recorded"])
def test_a_mark_between_ticks_splits_spend_at_its_instant(tmp_path: Path, recorded: bool) -> None:
    layout = parse_layout(LAYOUT, str(tmp_path / "layout.toml"))
    clock = [T0]
    recorder = Recorder.open(layout, tmp_path / "rec.sqlite", now=T0) if recorded else None
    feed = MonitorFeed(layout, sources=[], clock=lambda: clock[0], recorder=recorder)
    monitor = feed.monitor
    for t in (0.0, 10.0):
        monitor.tick(T0 + t)
    clock[0] = T0 + 15.0
    feed.mark_phase("load")  # as the TUI's `m` does, 5 s into the tick
    session = monitor.tick(T0 + 20.0).session
    if recorder is not None:
        recorder.close()
    by_phase = {p.phase: (round(p.spend_usd, 6), p.seconds) for p in session.spend_by_phase}
    # $36/h is $0.01 a second: 15 s of run, 5 s of load, whatever the feed
    assert by_phase == {"run": (0.15, 15.0), "load": (0.05, 5.0)}
    assert session.phase == "load"
    with pytest.raises(ValueError, match="unknown phase"):
        feed.mark_phase("lunch")
