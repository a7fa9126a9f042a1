"""Warm-up and standing (monitor.evaluation.judging): "judging" until verdicts can exist,
"reading" until a node is late, and one word per node that says where it stands."""

from __future__ import annotations

import pytest

from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.layouts import parse_layout
from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.figures import never_read_late
from infertop.monitor.evaluation.judging import judging_note, node_standing
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import NodeStatus, Severity, Standing, VerdictView
from infertop.monitor.text_report import snapshot_table


def _verdict(severity: Severity, pending: bool = False) -> VerdictView:
    return VerdictView(kind="idle", detail="x", severity=severity, pending=pending)


@pytest.mark.parametrize(
    ("status", "never_read", "late", "severities", "first_in", "expected"),
    [
        ("stale", True, False, [], 1.5, "reading"),  # not late yet: never "stale 0s"
        ("stale", True, True, [], None, "stale"),  # never answered, now late
        ("stale", False, True, [], None, "stale"),  # read once, then fell silent
        ("unreachable", False, True, [], None, "unreachable"),
        ("error", True, True, [], None, "error"),
        ("ok", False, False, [], 4.0, "judging"),  # no verdict yet is not good news yet
        ("ok", False, False, [], None, "ok"),
        ("ok", False, False, ["info"], None, "ok"),  # info is not trouble
        ("ok", False, False, ["warning"], None, "warning"),
        ("ok", False, False, ["warning", "critical"], None, "critical"),
        ("ok", False, False, ["critical"], 4.0, "critical"),  # a verdict while judging is known
        ("ok", False, False, [("critical", True)], None, "ok"),  # pending is not established
        ("ok", False, False, [("critical", True)], 3.0, "judging"),
    ],
)
def test_node_standing(
    status: NodeStatus, never_read: bool, late: bool, severities: list[object],
    first_in: float | None, expected: Standing,
) -> None:
    verdicts = [_verdict(*s) if isinstance(s, tuple) else _verdict(s) for s in severities]  # type: ignore[arg-type]
    assert node_standing(status, never_read, late, verdicts, first_in) == expected


@pytest.mark.parametrize(
    ("watched_for_s", "expected"),
    [(0.0, False), (1.0, False), (2.0, False), (2.01, True), (30.0, True)],
)
def test_never_read_is_late_only_after_stale_intervals(watched_for_s: float, expected: bool) -> None:
    th = Thresholds()  # stale after 2 intervals
    assert never_read_late(100.0, 100.0 + watched_for_s, 1.0, th) is expected
    assert never_read_late(None, 100.0, 1.0, th) is True  # not started: no excuse


LAYOUT = """
[cluster]
name = "warm-up"
interval_s = 1.0
window_s = 10.0

[pricing]
gpu_hour_usd = 2.0

[thresholds]
hold_s = 5.0

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 1
nics = [{ name = "ib0", expected_gbps = 400 }]

[[nodes]]
name = "decode-02"
role = "decode"
gpus = 1
nics = [{ name = "ib0", expected_gbps = 400 }]

[[nodes]]
name = "decode-03"
role = "decode"
gpus = 1
nics = [{ name = "ib0", expected_gbps = 400 }]
"""


def _sample(node: str, t: float, port_up: bool = True) -> NodeSample:
    return NodeSample(
        node=node, source="test", taken_at=t,
        gpus=[GpuSample(index=0, util_pct=80.0)],
        nics=[NicSample(name="ib0", kind="infiniband", state="up" if port_up else "down",
                        speed_gbps=400.0 if port_up else None)],
    )


def test_a_fresh_monitor_judges_before_it_clears() -> None:
    """Tick by tick from a monitor's start: decode-01 answers from the first second,
    decode-02 has a port down from the first second, decode-03 never answers. Until the
    first verdict window closed nothing says all clear, decode-03 is "reading" (never
    stale) until it is late, and a critical node never reads as plain "ok"."""
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    monitor.warm_up.start(1_000.0)
    seen: dict[float, dict[str, str | None]] = {}
    notes: dict[float, str | None] = {}
    for i in range(12):
        t = 1_000.0 + i
        monitor.fleet.ingest(_sample("decode-01", t))
        monitor.fleet.ingest(_sample("decode-02", t, port_up=False))
        snap = monitor.tick(t + 0.5)
        seen[i] = {n.name: n.standing for n in snap.nodes}
        notes[i] = judging_note(snap.cluster, len(snap.nodes))
        stale = [n for n in snap.nodes if any(v.kind == "stale" for v in n.verdicts)]
        if i < 2:
            # not late yet: no stale verdict, no stale word, and the fleet is judging
            assert not stale and seen[i]["decode-03"] == "reading"
            assert snap.nodes[2].status == "stale" and snap.nodes[2].age_s is None  # JSON enum kept
        if i < 6:
            assert seen[i]["decode-01"] == "judging" and notes[i] is not None
            assert notes[i].startswith("judging")
    assert seen[3]["decode-03"] == "stale"  # late now: 3.5 s watched > 2 intervals
    # decode-02's port down is a critical verdict once held: "critical", not "ok"
    assert seen[11]["decode-02"] == "critical"
    assert seen[11]["decode-01"] == "ok"
    assert notes[11] is None  # every node judged: now the hunt list may say all clear
    # the note counts down: 5 s hold + 1 interval from the first answered tick
    assert notes[0] == "judging — first verdicts in 6 s"
    assert notes[3] == "judging 2 of 3 nodes — first verdicts in 3 s"


def test_snapshot_text_says_judging_and_the_standing() -> None:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    monitor.warm_up.start(1_000.0)
    monitor.fleet.ingest(_sample("decode-01", 1_000.0))
    text = snapshot_table(monitor.tick(1_000.5))
    assert "judging — first verdicts in 6 s" in text
    rows = {line.split()[0]: line.split()[2] for line in text.splitlines()[1:4]}
    assert rows == {"decode-01": "judging", "decode-02": "reading", "decode-03": "reading"}
