"""Per-rank engines and real activity through the whole monitor (issue 35): a Monitor fed
vLLM 0.33 pages (tests/support/vllm_ranks_page.py) and GPUs with SM activity; the
snapshot carries each rank and each GPU's activity into its JSON (and back, as the record
and replay read it), the exporter serves them, and the verdicts name the rank."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infertop.monitor.exporter import SnapshotCollector, metric_names
from infertop.monitor.record.codec import decode_snapshot, encode_snapshot
from infertop.monitor.snapshot import Snapshot
from tests.support.ranks_cluster import ranks_snapshots


def _snapshot() -> Snapshot:
    return ranks_snapshots()[-1]


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
    snapshot = ranks_snapshots(hold_s=0)[-1]
    details = {v.kind: v.detail for v in snapshot.nodes[0].verdicts}
    assert details["straggler"].startswith("decode-05 engine 2 (GPUs 4–5): 12.0 decode steps/s")
    assert "decode-05 engine 3 (GPUs 6–7): GPUs 6,7 util 100 % but SM active 1 %" in details["busy-waiting"]


def test_a_gpu_held_by_a_process_not_the_engine_is_a_finding() -> None:
    snapshot = ranks_snapshots(hold_s=0, stray=True)[-1]
    details = {v.kind: v.detail for v in snapshot.nodes[0].verdicts}
    assert details["stray-process"].startswith("not the engine — GPU 3 held by pid 31337 (alice) python3 leftover_eval.py")
    assert details["stray-process"].endswith(": 6.0 GiB")
    # the engine's own processes are no finding
    clean = ranks_snapshots(hold_s=0)[-1]
    assert "stray-process" not in {v.kind for v in clean.nodes[0].verdicts}
    assert clean.nodes[0].gpus[3].processes is not None and clean.nodes[0].gpus[3].processes[0].pid == 4101


def _served(snapshot: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}


def test_process_memory_and_straggler_evidence_are_exported() -> None:
    snapshot = ranks_snapshots(hold_s=0, stray=True)[-1]
    [node] = snapshot.nodes
    got = _served(snapshot)
    held = {labels: value for (name, labels), value in got.items() if name == "infertop_gpu_process_memory_bytes"}
    # one series per process with its memory, exactly as the snapshot holds them
    want = {((("gpu", str(g.index)), ("node", node.name), ("pid", str(p.pid)), ("user", p.user or "")),
             float(p.gpu_mem_bytes)) for g in node.gpus for p in g.processes or () if p.gpu_mem_bytes is not None}
    assert want and set(held.items()) == want
    assert 6 * 1024**3 in held.values()  # the stray process's 6 GiB
    [straggler] = [v for v in node.verdicts if v.kind == "straggler"]
    assert straggler.evidence
    for e in straggler.evidence:
        labels = (("figure", e.figure), ("kind", "straggler"), ("node", node.name), ("unit", e.unit))
        for suffix, value in (("value", e.value), ("median", e.median), ("off_ratio", e.off)):
            name = f"infertop_verdict_evidence_{suffix}"
            assert got.get((name, labels)) == (None if value is None else pytest.approx(value)), (name, e)
    assert {n for n, _ in got} <= metric_names() | {"infertop_info"}
