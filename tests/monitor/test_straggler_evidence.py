"""Straggler attribution (issue 35): the straggler verdict of a decode pool carries its
evidence, ranked, each figure beside the pool's median — the scripted cause first."""

from __future__ import annotations

import pytest

from infertop.collectors.sample import EngineSample, GpuSample, NicSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor

LAYOUT = """
[cluster]
name = "pool"
interval_s = 1.0
window_s = 10.0

[pricing]
gpu_hour_usd = 2.5

[thresholds]
hold_s = 0

""" + "".join(f'[[nodes]]\nname = "decode-0{i}"\nrole = "decode"\ngpus = 4\n\n' for i in range(1, 6))
STRAGGLER = "decode-03"
CAPPED_GPU = 2


def _gpus(node: str) -> list[GpuSample]:
    out = []
    for g in range(4):
        capped = node == STRAGGLER and g == CAPPED_GPU
        out.append(GpuSample(index=g, util_pct=97.0, sm_clock_mhz=1110.0 if capped else 1965.0,
                             power_w=420.0 if capped else 690.0, temp_c=61.0 + g,
                             clock_event_reasons=0x4 if capped else 0, xid_last=0, ecc_uncorrected_total=0,
                             sm_active_pct=90.0 if node == STRAGGLER else 70.0))
    return out


def test_the_straggler_verdict_carries_ranked_evidence_with_the_pool_median() -> None:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    snapshot = None
    for i in range(11):
        for n in range(1, 6):
            name = f"decode-0{n}"
            steps = 18.0 if name == STRAGGLER else 30.0
            monitor.fleet.ingest(NodeSample(
                node=name, source="test", taken_at=990.0 + i, gpus=_gpus(name),
                nics=[NicSample(name="mlx5_0", kind="infiniband", state="active", speed_gbps=400.0,
                                rx_bytes_total=1e9 * i, tx_bytes_total=1e9 * i, errors_total=0.0)],
                engine=EngineSample(steps_total=steps * i, generation_tokens_total=steps * 40 * i,
                                    requests_running=40),
            ))
        snapshot = monitor.tick(990.0 + i)
    assert snapshot is not None
    nodes = {n.name: n for n in snapshot.nodes}
    [verdict] = [v for v in nodes[STRAGGLER].verdicts if v.kind == "straggler"]
    evidence = {e.figure: e for e in verdict.evidence}
    order = [e.figure for e in verdict.evidence]
    # the scripted cause leads: one GPU power-capped where the pool has none, its clock far down
    assert order[:2] == ["GPUs power-capped", "GPUs throttled (clock events)"]
    # shares, not counts: one of the node's 4 GPUs, none of the pool's
    assert evidence["GPUs power-capped"].value == 25.0 and evidence["GPUs power-capped"].unit == "% of GPUs"
    assert evidence["GPUs power-capped"].median == 0.0
    assert evidence["slowest SM clock"].value == 1110.0 and evidence["slowest SM clock"].median == 1965.0
    assert evidence["slowest SM clock"].off == pytest.approx((1965.0 - 1110.0) / 1965.0)
    assert evidence["decode steps/s"].value == pytest.approx(18.0) and evidence["decode steps/s"].median == 30.0
    assert evidence["lowest GPU power"].value == 420.0 and evidence["lowest GPU power"].median == 690.0
    # figures that are not off rank below those that are
    assert evidence["GPUs with an XID"].off == 0.0 and order.index("GPUs with an XID") > order.index("decode steps/s")
    assert evidence["NIC errors"].value == 0.0
    # only the straggler has a verdict
    assert all(not n.verdicts for n in snapshot.nodes if n.name != STRAGGLER)
