"""A log that stops moving while the GPUs work gets a word on the node (pure evaluation)."""

from __future__ import annotations

import pytest

from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts.loader import parse_layout
from infertop.monitor.monitor import Monitor

LAYOUT = '[cluster]\ninterval_s = 1\n[thresholds]\nlog_silent_s = 30\n[[nodes]]\nname = "n1"\ngpus = 2\n'


def notes_at(now: float, util: float | None, last_line_at: float, source: str = "log") -> list[str]:
    monitor = Monitor(parse_layout(LAYOUT), sources=[])
    for t in (now - 1, now):
        gpus = [GpuSample(index=i, util_pct=util) for i in range(2)]
        monitor.fleet.ingest(NodeSample(node="n1", source="ssh", taken_at=t, gpus=gpus))
        engine = EngineSample(source=source, log_last_line_at=last_line_at if source == "log" else None)
        monitor.fleet.ingest(NodeSample(node="n1", source="logsrc", taken_at=t, engine=engine))
    (node,) = monitor.tick(now).nodes
    return node.notes


def test_silent_log_with_busy_gpus_is_noted() -> None:
    (note,) = notes_at(1000.0, util=90.0, last_line_at=900.0)
    assert note.startswith("engine log silent for 100 s while GPUs are busy (mean util 90%)")


@pytest.mark.parametrize(
    ("util", "last_line_at", "source"),
    [
        (90.0, 980.0, "log"),  # recent line
        (1.0, 900.0, "log"),  # idle GPUs: vLLM stops printing while idle
        (None, 900.0, "log"),  # GPU figures unknown: no claim either way
        (90.0, 900.0, "endpoint"),  # figures from an endpoint, not a log
    ],
)
def test_no_note(util: float | None, last_line_at: float, source: str) -> None:
    assert notes_at(1000.0, util=util, last_line_at=last_line_at, source=source) == []
