"""The congested verdict and the P→D path's congested ports: a port counts only well above
its pool's baseline, named with its figures beside the pool's median, worst first (issue 46)."""

from __future__ import annotations

from typing import Any

from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.conditions import role_pools
from infertop.monitor.evaluation.congestion import (
    congested_condition,
    congestion_evidence_rows,
    congestion_pool,
)
from infertop.monitor.evaluation.pd_path import pd_paths
from infertop.monitor.evaluation.verdicts import node_conditions
from infertop.monitor.snapshot import EngineView, GpuView, NicView, NodeView

TH = Thresholds()
BASE_WAIT = 801.0  # every port of a healthy IB fabric waits a little


def ports(wait: float = BASE_WAIT, worst: float | None = None, pause: float = 0.02, ecn: float = 0.0,
          cnp: float | None = None, gbps: float = 40.0) -> list[NicView]:
    out = [NicView(name="eth0", kind="ethernet", state="up", speed_gbps=100.0, rx_bytes_per_s=1e6,
                   tx_bytes_per_s=1e6, rx_pause_per_s=pause, tx_pause_per_s=pause * 1.5, ecn_marked_per_s=ecn)]
    for i in range(4):
        w = worst if worst is not None and i == 2 else wait
        out.append(NicView(name=f"mlx5_{i}", kind="roce", state="up", speed_gbps=400.0, xmit_wait_per_s=w,
                           rx_bytes_per_s=gbps * 1e9 / 8, tx_bytes_per_s=gbps * 1e9 / 8,
                           cnp_sent_per_s=cnp, cnp_handled_per_s=cnp))
    return out


def node(name: str, role: str = "decode", kv: float | None = 0.018, **kw: Any) -> NodeView:
    return NodeView(name=name, role=role, status="ok", cost_per_hour_usd=84.66, age_s=0.5,
                    gpus=[GpuView(index=i, util_pct=90.0) for i in range(8)],
                    engine=EngineView(decode_steps_per_s=40.0, requests_running=8, kv_transfer_mean_s=kv),
                    nics=ports(**kw))


def cluster(storm: bool = True) -> list[NodeView]:
    nodes = [node(f"pre-{i}", "prefill", kv=None) for i in range(2)]
    for i in range(6):
        if i == 5 and storm:
            nodes.append(node("dec-5", wait=2e6, worst=3e6, pause=20_000.0, ecn=5_000.0, gbps=384.0, kv=0.42))
        else:
            nodes.append(node(f"dec-{i}"))
    return nodes


def kinds(n: NodeView, nodes: list[NodeView]) -> dict[str, str]:
    found = node_conditions(n, role_pools(nodes), None, TH, 0.0, congestion=congestion_pool(nodes))
    return {c.kind: c.detail for c in found}


def test_only_the_storming_node_is_congested_and_its_detail_names_ports_worst_first() -> None:
    nodes = cluster()
    verdicts = {n.name: kinds(n, nodes) for n in nodes}
    assert {name for name, v in verdicts.items() if v} == {"dec-5"}
    detail = verdicts["dec-5"]["congested"]
    # worst first (times its baseline: 3M ÷ 801, then eth0's 30k pause tx ÷ the 10/s floor),
    # each figure beside its pool's median
    assert detail.startswith(
        "mlx5_2 xmit_wait 3.0M/s (pool 801.0/s), at 96 % of line rate; "
        "eth0 pause rx 20.0k/s (pool 0.02/s), pause tx 30.0k/s (pool 0.03/s), ECN marks 5.0k/s (pool quiet); "
        "mlx5_0 xmit_wait 2.0M/s (pool 801.0/s), at 96 % of line rate")
    assert "+1 more ports" in detail  # 5 ports well above baseline; a reason names four
    # a counter no port reads is coverage's to say, not the reason's
    assert detail.endswith("KV transfers 0.42 s (pool 0.018 s)")


def test_a_port_at_its_pools_baseline_is_never_congested() -> None:
    # every port waits 801.0/s, far above the floor (0/s): that is the fabric's baseline
    nodes = cluster(storm=False)
    assert all(kinds(n, nodes) == {} for n in nodes)
    assert all(congested_condition(n, congestion_pool(nodes), TH) is None for n in nodes)
    (path,) = pd_paths(nodes, TH, {})
    assert path.congested is False and path.prefill.congested_ports == path.decode.congested_ports == []


def test_the_pd_path_names_the_congested_end_worst_first_and_never_a_baseline_port() -> None:
    (path,) = pd_paths(cluster(), TH, {})
    assert path.congested is True
    assert path.prefill is not None and path.prefill.congested_ports == []
    assert path.decode is not None
    named = path.decode.congested_ports
    assert named[0] == "dec-5/mlx5_2: xmit_wait 3.0M/s (pool 801.0/s), at 96 % of line rate"
    assert all(p.startswith("dec-5/") for p in named)
    assert "pre-0" not in path.detail and "congested — dec-5/mlx5_2" in path.detail


def test_line_rate_alone_is_not_congestion() -> None:
    # ports near line rate with no congestion counter rising: link-starved's to judge
    # (against the node's GPUs), never a congested verdict
    bare = [NicView(name=f"mlx5_{i}", kind="infiniband", state="up", speed_gbps=400.0) for i in range(2)]
    nodes = [n.model_copy(update={"nics": [b.model_copy(update={"rx_bytes_per_s": (384e9 if n.name == "dec-5"
                                                                                   else 40e9) / 8})
                                           for b in bare]})
             for n in cluster()]
    assert all("congested" not in kinds(n, nodes) for n in nodes)


def test_the_evidence_rows_name_each_port_figure_beside_the_pool() -> None:
    nodes = cluster()
    dec5 = next(n for n in nodes if n.name == "dec-5")
    rows = congestion_evidence_rows(dec5, congestion_pool(nodes), TH)
    assert (rows[0].figure, rows[0].value, rows[0].median) == ("mlx5_2 xmit_wait", 3e6, 801.0)
    assert ("eth0 ECN marks", 5_000.0, 0.0) in [(r.figure, r.value, r.median) for r in rows]
    assert (rows[-1].figure, rows[-1].value, rows[-1].median) == ("KV transfer mean", 0.42, 0.018)


def _by_priority(name: str, prio0: float, prio3: float) -> NodeView:
    """A decode node whose eth0 reads its pause frames per priority: every port of the
    fabric pauses on priority 0 (lossless storage traffic), `prio3` on the RoCE class."""
    n = node(name)
    eth0 = n.nics[0].model_copy(update={
        "rx_pause_per_s": prio0 + prio3, "tx_pause_per_s": prio0,
        "pause_per_s_by_priority": {"rx0": prio0, "rx3": prio3, "tx0": prio0, "tx3": 0.0}})
    return n.model_copy(update={"nics": [eth0, *n.nics[1:]]})


def test_pause_frames_are_judged_and_told_per_priority() -> None:
    # a storm on priority 3 (2,000/s) under a fabric-wide 1,000/s on priority 0: the sum
    # (3,000/s) is under 4 × the pool's 1,000/s, the priority's own is far above its 0/s
    nodes = [_by_priority(f"dec-{i}", 1000.0, 0.0) for i in range(5)] + [_by_priority("dec-5", 1000.0, 2000.0)]
    verdicts = {n.name: kinds(n, nodes) for n in nodes}
    assert {name for name, v in verdicts.items() if v} == {"dec-5"}
    assert verdicts["dec-5"]["congested"].startswith("eth0 prio 3 pause rx 2.0k/s (pool quiet)")
    assert "prio 0" not in verdicts["dec-5"]["congested"]  # at its pool's baseline
    rows = {r.figure: r for r in congestion_evidence_rows(nodes[-1], congestion_pool(nodes), TH)}
    assert (rows["eth0 prio 3 pause rx"].value, rows["eth0 prio 3 pause rx"].median) == (2000.0, 0.0)
    assert "eth0 pause rx" not in rows  # the sum is not a second row beside its priorities


def test_a_congestion_counter_no_port_reads_is_a_coverage_gap_said_once() -> None:
    from infertop.monitor.evaluation.coverage import congestion_counter_gaps

    # pause frames and ECN read on eth0, no CNP on any port: one gap, CNP
    (gap,) = congestion_counter_gaps(ports())
    assert gap.kind == "cnp" and gap.detail.startswith("CNP unknown: no port reports congestion notifications")
    assert congestion_counter_gaps(ports(cnp=0.0)) == []  # read, and zero: known, not a gap
    # an InfiniBand-only node has no RoCE counters to miss
    ib = [NicView(name="mlx5_0", kind="infiniband", state="up", speed_gbps=400.0, xmit_wait_per_s=801.0)]
    assert congestion_counter_gaps(ib) == []
    # the first reading, before any rate is known, says nothing is unread
    first = [n.model_copy(update={"rx_bytes_per_s": None, "xmit_wait_per_s": None, "rx_pause_per_s": None,
                                  "tx_pause_per_s": None, "ecn_marked_per_s": None}) for n in ports()]
    assert congestion_counter_gaps(first) == []
