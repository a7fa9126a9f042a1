"""Issue 46's cluster through the real Monitor (tests/support/issue46_cluster.py): each
scripted trouble yields exactly its verdict on exactly its node, the evidence rows name
the GPU, port, rank or setting, and no healthy node or baseline port is ever named."""

from __future__ import annotations

import pytest

from infertop.monitor.snapshot import EvidenceView, NodeView, Snapshot
from tests.support.issue46_cluster import (
    DECODE,
    DRIFT_NODE,
    GPU_HOUR_USD,
    GPUS,
    RESTART_AT_TICK,
    RESTART_NODE,
    SLOW_NODE,
    START,
    STORM_NODE,
    WAITING_NODE,
    run_cluster,
)

EXPECTED = {
    STORM_NODE: {"congested"},
    SLOW_NODE: {"straggler", "throttled"},  # the slow rank, and the throttled GPU it runs on
    WAITING_NODE: {"busy-waiting"},
    DRIFT_NODE: {"config-drift"},
    RESTART_NODE: {"restarted"},  # an info mark on the row and in the hunt list, no fault
}


@pytest.fixture(scope="module")
def frames() -> list[Snapshot]:
    return run_cluster(ticks=16)


def _nodes(frame: Snapshot) -> dict[str, NodeView]:
    return {n.name: n for n in frame.nodes}


def _rows(node: NodeView, kind: str) -> dict[str, EvidenceView]:
    verdict = next(v for v in node.verdicts if v.kind == kind)
    return {e.figure: e for e in verdict.evidence}


def test_each_trouble_is_exactly_its_verdict_on_exactly_its_node(frames: list[Snapshot]) -> None:
    for frame in frames:
        got = {n.name: {v.kind for v in n.verdicts} for n in frame.nodes}
        # nothing, ever, on a node without a trouble (the restarted dec-1 among them)
        assert all(got[name] <= EXPECTED.get(name, set()) for name in got), got
    last = {n.name: {v.kind for v in n.verdicts} for n in frames[-1].nodes}
    assert last == {name: EXPECTED.get(name, set()) for name in last}


def test_the_slow_rank_paces_its_node_and_is_named_beside_it(frames: list[Snapshot]) -> None:
    dec3 = _nodes(frames[-1])[SLOW_NODE]
    assert dec3.engine is not None
    assert dec3.engine.decode_steps_per_s == pytest.approx(16.0, rel=0.02)
    assert dec3.engine.slowest_rank == "engine 5 (GPU 5)"
    assert dec3.engine.fastest_rank_steps_per_s == pytest.approx(40.0, rel=0.02)
    # worst first by steps/s brings it up
    slowest = min((n for n in frames[-1].nodes if n.role == "decode"),
                  key=lambda n: n.engine.decode_steps_per_s if n.engine and n.engine.decode_steps_per_s else 1e9)
    assert slowest.name == SLOW_NODE
    straggler = next(v for v in dec3.verdicts if v.kind == "straggler")
    assert "slowest rank dec-3 engine 5 (GPU 5) 16.0 steps/s" in straggler.detail
    # the whole decode pool waits: its $/h × (1 − 16/40)
    pool_usd = len(DECODE) * GPUS * GPU_HOUR_USD
    assert straggler.usd_per_hour_at_stake == pytest.approx(pool_usd * (1 - 16.0 / 40.0), rel=0.03)
    rows = _rows(dec3, "straggler")
    # the evidence agrees with the header: the rank's GPU, named, its steps/s on one line
    assert rows["engine 5 (GPU 5) steps/s"].value == pytest.approx(16.0, rel=0.02)
    assert rows["engine 5 (GPU 5) steps/s"].median == pytest.approx(40.0, rel=0.02)
    assert rows["decode steps/s"].value == pytest.approx(16.0, rel=0.02)
    assert rows["GPU 5: slowest SM clock"].value == 1035 and rows["GPU 5: slowest SM clock"].median == 1980
    assert rows["GPU 5: GPUs throttled (clock events)"].value == 100.0
    ranks = {r.dp_rank: r.gpus for r in dec3.engine.ranks or ()}
    assert ranks == {i: [i] for i in range(GPUS)}  # the engine → GPU map: no "—"


def test_the_throttled_gpu_is_named_in_its_evidence(frames: list[Snapshot]) -> None:
    dec3 = _nodes(frames[-1])[SLOW_NODE]
    throttled = next(v for v in dec3.verdicts if v.kind == "throttled")
    assert throttled.detail == "GPU 5 SwThermal"
    rows = _rows(dec3, "throttled")
    assert (rows["GPU 5 SM clock"].value, rows["GPU 5 SM clock"].median) == (1035, 1980)
    assert (rows["GPU 5 temperature"].value, rows["GPU 5 temperature"].median) == (88, 64)
    assert rows["engine 5 (GPU 5) steps/s"].value == pytest.approx(16.0, rel=0.02)
    assert not any(name.startswith(("GPU 4", "GPU 6")) for name in rows)


def test_the_pause_storm_is_congestion_on_its_node_and_the_path_names_only_its_ports(
    frames: list[Snapshot],
) -> None:
    dec5 = _nodes(frames[-1])[STORM_NODE]
    congested = next(v for v in dec5.verdicts if v.kind == "congested")
    assert congested.detail.startswith("eth0 prio 3 pause rx 20.0k/s (pool quiet), prio 3 pause tx 30.0k/s (pool quiet), "
                                       "ECN marks 5.0k/s (pool quiet); mlx5_0 xmit_wait 2.0M/s (pool 801.0/s)")
    assert "at 96 % of line rate" in congested.detail
    rows = _rows(dec5, "congested")
    assert (rows["mlx5_0 xmit_wait"].value, rows["mlx5_0 xmit_wait"].median) == (pytest.approx(2e6), 801.0)
    assert rows["eth0 ECN marks"].value == pytest.approx(5000.0)
    (path,) = frames[-1].pd_paths
    assert path.congested is True and path.prefill is not None and path.decode is not None
    # the counters that say so (the line-rate note is none of them)
    assert path.evidence == "congestion counters (ECN, pause, xmit_wait)"
    assert path.prefill.congested_ports == []  # the prefill ports sit at the baseline
    assert path.decode.congested_ports and all(p.startswith(f"{STORM_NODE}/") for p in path.decode.congested_ports)
    # the node screen's port rows carry ECN marks
    eth0 = next(n for n in dec5.nics if n.name == "eth0")
    assert eth0.ecn_marked_per_s == pytest.approx(5000.0)


def test_busy_waiting_and_drift_name_their_gpus_and_setting(frames: list[Snapshot]) -> None:
    nodes = _nodes(frames[-1])
    rows = _rows(nodes[WAITING_NODE], "busy-waiting")
    assert {name for name in rows if name.startswith("GPU")} == {
        "GPU 6 util", "GPU 7 util", "GPU 6 SM active", "GPU 7 SM active"}
    assert rows["GPU 6 SM active"].value == 1.5 and rows["GPU 6 SM active"].median == 70.0
    drift = _rows(nodes[DRIFT_NODE], "config-drift")
    assert (drift["setting cache.block_size"].value_text, drift["setting cache.block_size"].median_text) == (
        "32", "64 (5 of 6)")


def test_the_restart_is_marked_where_its_dip_shows(frames: list[Snapshot]) -> None:
    for tick, frame in enumerate(frames):
        dec1 = _nodes(frame)[RESTART_NODE]
        marks = [v for v in dec1.verdicts if v.kind == "restarted"]
        if tick < RESTART_AT_TICK:
            assert not marks and dec1.restarted_at is None
            continue
        (mark,) = marks
        assert mark.severity == "info" and mark.since == dec1.restarted_at == START + RESTART_AT_TICK
        assert mark.detail.startswith("engine restarted: steps_total fell")
    # the timeline tells the restart once, not again as a verdict onset
    said = [e for e in frames[-1].timeline if e.node == RESTART_NODE]
    assert [e.kind for e in said] == ["restart"]


def test_a_restarts_dip_is_no_straggler() -> None:
    # a restart that leaves dec-1's steps/s at half its peers' for the whole window: marked
    # restarted, never called slow (issue 46: "a restart is a dip with no mark")
    from tests.support import issue46_cluster as cluster

    frames = cluster.run_cluster(ticks=16, restart_slow_s=20.0)
    for frame in frames[cluster.RESTART_AT_TICK:]:
        dec1 = _nodes(frame)[RESTART_NODE]
        assert {v.kind for v in dec1.verdicts} == {"restarted"}


def test_the_unread_cnp_counter_is_one_coverage_finding(frames: list[Snapshot]) -> None:
    # no node's exporters serve CNPs (node_exporter reads no hw_counters): said once for
    # the fleet, never a blind verdict on each row, nor words in the congested reason
    last = frames[-1]
    cnp = [s for s in last.cluster.shared_blind_spots if "cnp" in s.kinds]
    assert len(cnp) == 1 and cnp[0].nodes == len(last.nodes), last.cluster.shared_blind_spots
    assert "CNP unknown" in cnp[0].detail
    assert not any(v.kind == "blind" for n in last.nodes for v in n.verdicts)
    dec5 = _nodes(last)[STORM_NODE]
    assert "CNP" not in next(v for v in dec5.verdicts if v.kind == "congested").detail
