"""Blind spots every peer shares (monitor/evaluation/shared_gaps.py): the real Monitor over
stock exporter pages (real HTTP) says them once, in the cluster view, and everything that
reads a snapshot carries it — the exporter, the record (and an old record without the field
still reads); and the peer rules on plain node views: peers are the same role read by the
same sources, a lone node has none, a failed page naming its own URL is never shared, an
acknowledged gap (`blind_ignore`) is no finding."""

from __future__ import annotations

import json
import zlib

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from infertop.layouts import parse_layout
from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.conditions import blind_condition
from infertop.monitor.evaluation.shared_gaps import mark_shared, shared_blind_spots, spot_severity
from infertop.monitor.exporter import SnapshotCollector
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.codec import decode_snapshot, encode_snapshot
from infertop.monitor.snapshot import CoverageGap, NodeView
from infertop.monitor.text_report import snapshot_table
from tests.support.stock_cluster import STOCK_MISSING, cluster_pages, layout_toml, node_names, serve_pages
from tests.support.waiting import until_async

NAMES = node_names(4)
ECC = CoverageGap(kind="ecc", detail="ECC unknown: dcgm-exporter does not collect DCGM_FI_DEV_ECC_DBE_VOL_TOTAL "
                  "(add it: docs/dcgm-counters.csv)")
THROTTLE = CoverageGap(kind="clock_events", detail="throttle unknown: dcgm-exporter does not collect "
                       "DCGM_FI_DEV_CLOCKS_EVENT_REASONS (add it: docs/dcgm-counters.csv)")


def node(name: str, *gaps: CoverageGap, role: str = "decode", sources: tuple[str, ...] = ("scrape",),
         status: str = "ok") -> NodeView:
    return NodeView(name=name, role=role, status=status, sources=list(sources), coverage=list(gaps))  # type: ignore[arg-type]


def dead_page(name: str) -> CoverageGap:
    return CoverageGap(kind="ports", detail=f"links unknown: node_exporter page failed (cannot connect to "
                       f"http://{name}:9100/metrics)")


def shared_kinds(n: NodeView) -> list[str]:
    return [g.kind for g in n.coverage if g.shared]


async def test_the_monitor_says_a_shared_blind_spot_once_everywhere() -> None:
    with serve_pages(cluster_pages(NAMES)) as url:
        layout = parse_layout(layout_toml(url, NAMES, interval_s=0.5, hold_s=0.5))
        monitor = Monitor(layout)
        await monitor.start()
        try:
            frames = [monitor.tick()]

            def settled() -> bool:
                frames.append(monitor.tick())
                return all(n.status == "ok" and n.coverage for n in frames[-1].nodes)

            await until_async(settled, 30.0, "every node ok, with its coverage", every_s=0.1,
                              detail=lambda: [n.status for n in frames[-1].nodes])
            frame = frames[-1]
        finally:
            await monitor.stop()
    [spot] = frame.cluster.shared_blind_spots
    assert spot.nodes == len(NAMES) and spot.kinds == ["clock_events", "ecc", "nvlink_errors"]
    assert spot.fix is not None and all(f in spot.fix for f in STOCK_MISSING)
    assert all(shared_kinds(n) == spot.kinds for n in frame.nodes)
    assert frame.cluster.blind_nodes == 0
    # the exporter: how many nodes share each blind spot, and no node verdict
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: frame))
    exported = generate_latest(registry).decode()
    for kind in spot.kinds:
        assert f'infertop_cluster_shared_blind_spot_nodes{{kind="{kind}"}} 4.0' in exported
    assert 'infertop_node_verdict{kind="blind"' not in exported
    # the record keeps it; a record written before the field still reads, without it
    stored = decode_snapshot(encode_snapshot(frame))
    assert stored.cluster.shared_blind_spots == frame.cluster.shared_blind_spots
    assert [shared_kinds(n) for n in stored.nodes] == [shared_kinds(n) for n in frame.nodes]
    old = json.loads(frame.model_dump_json(by_alias=True))
    del old["cluster"]["shared_blind_spots"]
    for n in old["nodes"]:
        for gap in n["coverage"]:
            del gap["shared"]
    replayed = decode_snapshot(zlib.compress(json.dumps(old).encode()))
    assert replayed.cluster.shared_blind_spots == []
    assert all(not g.shared for n in replayed.nodes for g in n.coverage)
    # the text table: one line for the cluster, none per node
    text = snapshot_table(frame)
    assert [ln for ln in text.splitlines() if ln.startswith("unseen")] == [f"unseen cluster: {spot.note}"]


def test_peers_share_a_gap_only_when_every_one_has_it() -> None:
    th = Thresholds()
    nodes = mark_shared([node("a", THROTTLE, ECC), node("b", THROTTLE, ECC), node("c", ECC)])
    assert [shared_kinds(n) for n in nodes] == [["ecc"], ["ecc"], ["ecc"]]
    # the one that misses more than its peers keeps that much as its verdict
    verdicts = [blind_condition(n, th) for n in nodes]
    assert verdicts[2] is None
    assert verdicts[0] is not None and verdicts[0].detail == THROTTLE.detail
    [spot] = shared_blind_spots(nodes, th)
    assert spot.nodes == 3 and spot.kinds == ["ecc"] and spot.note.startswith("all 3 decode nodes")
    assert spot.fix is not None and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in spot.fix


def test_who_counts_as_a_peer() -> None:
    th = Thresholds()
    # a lone node has no peers; another role, or another way of reading, is another group
    assert shared_kinds(mark_shared([node("a", ECC)])[0]) == []
    mixed = mark_shared([node("a", ECC), node("p", ECC, role="prefill"), node("s", ECC, sources=("ssh",))])
    assert [shared_kinds(n) for n in mixed] == [[], [], []]
    # a node that does not answer is no evidence either way, but still a peer: the one
    # survivor of a pool does not turn what the pool shares into its own verdict
    with_stale = mark_shared([node("a", ECC), node("b", ECC), node("c", status="stale")])
    assert [shared_kinds(n) for n in with_stale] == [["ecc"], ["ecc"], []]
    survivor = mark_shared([node("a", ECC), node("b", status="stale"), node("c", status="unreachable")])
    assert [shared_kinds(n) for n in survivor] == [["ecc"], [], []]
    [spot] = shared_blind_spots(survivor, th)
    assert spot.nodes == 1 and spot.note.startswith("1 decode node (read by scrape)")
    # failed pages name their own URLs: each node's own fault, never a shared one
    dead = mark_shared([node("a", dead_page("a")), node("b", dead_page("b"))])
    assert [shared_kinds(n) for n in dead] == [[], []]
    # two pools with the same gap are one finding naming both
    pools = mark_shared([node("a", ECC), node("b", ECC), node("p", ECC, role="prefill"),
                         node("q", ECC, role="prefill")])
    [spot] = shared_blind_spots(pools, th)
    assert spot.nodes == 4 and spot.roles == ["decode", "prefill"]
    # acknowledged gaps raise nothing, shared or not
    assert shared_blind_spots(pools, Thresholds(blind_ignore=["ecc"])) == []


def test_no_gap_no_copy() -> None:
    nodes = [node("a"), node("b")]
    assert all(x is y for x, y in zip(mark_shared(nodes), nodes, strict=True))


def test_a_gap_not_from_dcgm_keeps_its_own_reason() -> None:
    ports = CoverageGap(kind="nic_errors", detail="port errors unknown: node_exporter reports no "
                        "network device error counters (node_network_receive_errs_total)")
    nodes = mark_shared([node("a", ports, ECC), node("b", ports, ECC)])
    [spot] = shared_blind_spots(nodes, Thresholds())
    assert spot.kinds == ["nic_errors", "ecc"]
    assert ports.detail in spot.note and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in spot.note


@pytest.mark.parametrize(("kinds", "severity"), [
    (["cnp"], "info"),  # node_exporter serves no CNP counter; pause and ECN still judge
    (["cnp", "ecn"], "info"),
    (["pause", "cnp", "ecn"], "warning"),  # the congested verdict reads nothing at all
    (["cnp", "ecc"], "warning"),  # anything else unknown keeps the warning
    (["ecc"], "warning"),
    (["clock_events"], "warning"),
    ([], "warning"),
])
def test_a_shared_spot_counts_as_info_only_where_congestion_is_still_judged(
    kinds: list[str], severity: str
) -> None:
    assert spot_severity(kinds) == severity
