"""Per-rank engines and real activity through the whole monitor (issue 35): a Monitor fed
vLLM 0.33 pages (tests/fixtures/vllm_ranks_page.py) and GPUs with SM activity; the
snapshot carries each rank and each GPU's activity into its JSON (and back, as the record
and replay read it), the exporter serves them, and the verdicts name the rank."""

from __future__ import annotations

import pytest
from fixtures.vllm_ranks_page import VllmRanksServer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collectors.profiles import engine_sample_from_text
from collectors.sample import GpuSample, NodeSample
from layouts import parse_layout
from monitor.exporter import SnapshotCollector, metric_names
from monitor.monitor import Monitor
from monitor.record.store import decode_snapshot, encode_snapshot
from monitor.snapshot import Snapshot

LAYOUT = """
[cluster]
name = "ranks"
interval_s = 1.0
window_s = 10.0
tensor_parallel_size = 4

[pricing]
gpu_hour_usd = 2.5

[[nodes]]
name = "decode-05"
role = "decode"
gpus = 8
engine = { url = "http://127.0.0.1:1/metrics", tensor_parallel_size = 2 }
"""
STEPS = [30.0, 30.0, 12.0, 30.0]  # engine 2 (GPUs 4–5) straggles within its node


def _snapshot() -> Snapshot:
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    server = VllmRanksServer(engines=4)
    for i in range(11):
        server.advance_ranks(1.0, STEPS, [0.7] * 4, [0.03] * 4)
        gpus = [GpuSample(index=g, util_pct=100.0, sm_active_pct=1.0 if g in (6, 7) else 85.0,
                          tensor_active_pct=50.0, activity_source="gpm") for g in range(8)]
        monitor.state.add(NodeSample(node="decode-05", source="test", taken_at=990.0 + i, gpus=gpus,
                                     engine=engine_sample_from_text(server.page(), "vllm")))
    return monitor.tick(1_000.0)


def test_ranks_and_activity_reach_the_snapshot_json_the_exporter_and_back() -> None:
    snapshot = _snapshot()
    [node] = snapshot.nodes
    assert node.engine is not None and node.engine.ranks is not None
    labels = [r.label for r in node.engine.ranks]
    # the node's own tensor_parallel_size (2) wins over the cluster's (4)
    assert labels == ["engine 0 (GPUs 0–1)", "engine 1 (GPUs 2–3)", "engine 2 (GPUs 4–5)", "engine 3 (GPUs 6–7)"]
    assert node.engine.ranks[2].decode_steps_per_s == pytest.approx(12.0, rel=0.02)
    assert node.idle_basis == "sm_active" and node.gpus[6].sm_active_pct == 1.0
    # the record stores the snapshot's JSON and replay reads it back with the model
    back = decode_snapshot(encode_snapshot(snapshot))
    assert back.nodes[0].engine is not None and back.nodes[0].engine.ranks is not None
    assert back.nodes[0].engine.ranks[2].label == "engine 2 (GPUs 4–5)"
    assert back.nodes[0].gpus[6].activity_source == "gpm"
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot))
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    key = (("engine", "engine=2"), ("gpus", "4,5"), ("node", "decode-05"), ("role", "decode"))
    assert got[("infertop_engine_decode_steps_per_second", key)] == pytest.approx(12.0, rel=0.02)
    assert got[("infertop_gpu_sm_active_ratio", (("gpu", "6"), ("node", "decode-05"), ("source", "gpm")))] == 0.01
    assert got[("infertop_node_idle_basis", (("basis", "sm_active"), ("node", "decode-05")))] == 1.0
    assert {n for n, _ in got} <= metric_names() | {"infertop_info"}


def test_verdicts_name_the_rank() -> None:
    layout = LAYOUT.replace("[[nodes]]", "[thresholds]\nhold_s = 0\n\n[[nodes]]")
    monitor = Monitor(parse_layout(layout), sources=[], clock=lambda: 1_000.0)
    server = VllmRanksServer(engines=4)
    snapshot = None
    for i in range(11):
        server.advance_ranks(1.0, STEPS, [0.7] * 4, [0.03] * 4)
        gpus = [GpuSample(index=g, util_pct=100.0, sm_active_pct=1.0 if g in (6, 7) else 85.0) for g in range(8)]
        monitor.state.add(NodeSample(node="decode-05", source="test", taken_at=990.0 + i, gpus=gpus,
                                     engine=engine_sample_from_text(server.page(), "vllm")))
        snapshot = monitor.tick(990.0 + i)
    assert snapshot is not None
    details = {v.kind: v.detail for v in snapshot.nodes[0].verdicts}
    assert details["straggler"].startswith("decode-05 engine 2 (GPUs 4–5): 12.0 decode steps/s")
    assert "decode-05 engine 3 (GPUs 6–7): GPUs 6,7 util 100 % but SM active 1 %" in details["busy-waiting"]
