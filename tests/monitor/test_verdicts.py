"""Verdicts from plain numbers: each condition, hold and clear, and the no-flap rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertop.layouts.model import Layout, NicExpectation, NodeConfig, Thresholds
from infertop.monitor.evaluation.conditions import idle_condition, role_pools
from infertop.monitor.evaluation.congestion import congestion_pool
from infertop.monitor.evaluation.verdicts import VerdictTracker, hunt_order, node_conditions
from infertop.monitor.snapshot import EngineView, GpuView, NicView, NodeView, VerdictView

GB = 1e9 / 8  # bytes/s in one Gb/s


def gpus(n: int = 8, util: float = 90.0, **kw: Any) -> list[GpuView]:
    return [GpuView(index=i, util_pct=util, **kw) for i in range(n)]


def engine(steps: float = 50.0, running: float = 8.0, **kw: Any) -> EngineView:
    return EngineView(decode_steps_per_s=steps, requests_running=running, **kw)


def node(name: str = "decode-01", role: str = "decode", **kw: Any) -> NodeView:
    kw.setdefault("status", "ok")
    kw.setdefault("gpus", gpus())
    kw.setdefault("engine", engine())
    kw.setdefault("cost_per_hour_usd", 80.0)
    kw.setdefault("age_s", 0.5)
    return NodeView(name=name, role=role, **kw)


def layout(names: Sequence[str] = ("decode-01",), nics: Sequence[NicExpectation] = (), **th: Any) -> Layout:
    th.setdefault("hold_s", 10.0)
    th.setdefault("clear_s", 10.0)
    th.setdefault("idle_hold_s", 30.0)
    return Layout(
        thresholds=Thresholds(**th),
        nodes=[NodeConfig(name=n, role="decode", gpus=8, nics=list(nics)) for n in names],
    )


def kinds(views: Sequence[NodeView], name: str = "decode-01") -> list[str]:
    return [v.kind for n in views if n.name == name for v in n.verdicts]


def only(views: Sequence[NodeView], kind: str, name: str = "decode-01") -> VerdictView:
    found = [v for n in views if n.name == name for v in n.verdicts if v.kind == kind]
    assert len(found) == 1, [v.kind for n in views for v in n.verdicts]
    return found[0]


def conditions(n: NodeView, lay: Layout, peers: Sequence[NodeView] | None = None) -> dict[str, str]:
    config = lay.node(n.name) if any(c.name == n.name for c in lay.nodes) else None
    pools = role_pools(peers or [n])
    congestion = congestion_pool(peers or [n])
    return {c.kind: c.detail for c in node_conditions(n, pools, config, lay.thresholds, 0.0, congestion=congestion)}


# --------------------------------------------------------------------------- hold / clear


def test_hold_then_clear_times() -> None:
    lay = layout(hold_s=10, clear_s=5)
    tracker = VerdictTracker()
    hot = node(gpus=gpus(clock_event_reasons=0x40))
    cool = node()
    for t in range(0, 10):
        assert "throttled" not in kinds(tracker.apply([hot], lay, 1000.0 + t))
    out = tracker.apply([hot], lay, 1010.0)
    v = only(out, "throttled")
    assert v.since == 1000.0  # dated from when the condition began, not when it was confirmed
    assert [(name, x.kind) for name, x in tracker.started] == [("decode-01", "throttled")]
    # false, but not for the clear time yet: still shown
    for t in (1011.0, 1013.0, 1015.9):
        assert "throttled" in kinds(tracker.apply([cool], lay, t))
    assert tracker.started == []
    assert "throttled" not in kinds(tracker.apply([cool], lay, 1016.0))


def test_condition_toggling_faster_than_hold_never_shows() -> None:
    lay = layout(hold_s=10, clear_s=10)
    tracker = VerdictTracker()
    hot, cool = node(gpus=gpus(clock_event_reasons=0x20)), node()
    for t in range(120):  # true for 4 s, false for 1 s, forever
        out = tracker.apply([cool if t % 5 == 4 else hot], lay, float(t))
        assert kinds(out) == [], t


def test_active_verdict_does_not_blink_when_condition_dips_briefly() -> None:
    lay = layout(hold_s=2, clear_s=10)
    tracker = VerdictTracker()
    hot, cool = node(gpus=gpus(clock_event_reasons=0x20)), node()
    for t in range(3):
        tracker.apply([hot], lay, float(t))
    for t in range(3, 100):  # false 1 s in 5: never for the clear time
        out = tracker.apply([cool if t % 5 == 0 else hot], lay, float(t))
        assert kinds(out) == ["throttled"], t
    assert only(out, "throttled").since == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_no_verdict_without_an_unbroken_hold(pattern: list[bool]) -> None:
    """Property: at every tick, a verdict is shown iff the condition ran unbroken for the
    hold at some point and has not since been false for the clear time."""
    hold, clear = 3.0, 2.0
    lay = layout(hold_s=hold, clear_s=clear)
    tracker = VerdictTracker()
    hot, cool = node(gpus=gpus(clock_event_reasons=0x8)), node()
    run_start: int | None = None
    active, false_since = False, None
    for t, on in enumerate(pattern):
        shown = "throttled" in kinds(tracker.apply([hot if on else cool], lay, float(t)))
        if on:
            run_start = t if run_start is None else run_start
            false_since = None
            active = active or t - run_start >= hold
        else:
            run_start = None
            if active:
                false_since = t if false_since is None else false_since
                if t - false_since >= clear:
                    active, false_since = False, None
        assert shown == active, (t, pattern)


# --------------------------------------------------------------------------- idle


def test_idle_needs_its_own_hold_and_names_the_money() -> None:
    lay = layout(idle_hold_s=30)
    tracker = VerdictTracker()
    idle = node(gpus=gpus(util=1.0), engine=engine(steps=0.0, running=0.0), cost_per_hour_usd=84.66)
    assert kinds(tracker.apply([idle], lay, 0.0)) == []
    assert kinds(tracker.apply([idle], lay, 29.0)) == []
    v = only(tracker.apply([idle], lay, 30.0), "idle")
    assert v.usd_per_hour_at_stake == pytest.approx(84.66)
    assert "8 GPUs at ≤ 1 % util" in v.detail and "0 running requests" in v.detail
    assert "$84.66/h idle" in v.detail


@pytest.mark.parametrize(
    ("gpu_list", "eng", "is_idle"),
    [
        (gpus(util=2.0), engine(steps=0.0, running=0.0), True),
        (gpus(util=2.0), None, True),  # GPUs alone are evidence enough
        (gpus(util=2.0), engine(steps=0.0, running=1.0), False),  # a request in flight
        (gpus(util=2.0), engine(steps=3.0, running=None), False),  # steps taken
        ([*gpus(7, util=2.0), GpuView(index=7, util_pct=40.0)], None, False),  # one GPU busy
        ([], engine(steps=0.0, running=0.0), True),  # no GPU figures: an engine at rest
        ([], None, False),  # nothing known: no verdict
        ([GpuView(index=0)], None, False),  # util unknown is not 0
    ],
)
def test_idle_condition(gpu_list: list[GpuView], eng: EngineView | None, is_idle: bool) -> None:
    n = node(gpus=gpu_list, engine=eng)
    assert (idle_condition(n, Thresholds()) is not None) == is_idle


# --------------------------------------------------------------------------- link-starved

IB4 = [NicExpectation(name=f"mlx5_{i}", expected_gbps=400) for i in range(4)]


def ib(name: str, state: str = "active", rx_gbps: float = 50.0, tx_gbps: float = 50.0, **kw: Any) -> NicView:
    kw.setdefault("speed_gbps", 400.0)
    kw.setdefault("expected_gbps", 400.0)
    return NicView(name=name, kind="infiniband", state=state, rx_bytes_per_s=rx_gbps * GB,
                   tx_bytes_per_s=tx_gbps * GB, **kw)


def test_ports_down_and_traffic_piled_on_one_port() -> None:
    lay = layout(nics=IB4)
    nics = [
        ib("mlx5_0", rx_gbps=380, tx_gbps=370),
        ib("mlx5_1", rx_gbps=10, tx_gbps=10),
        ib("mlx5_2", state="down", rx_gbps=0, tx_gbps=0),
        NicView(name="mlx5_3", kind="other", state="missing", expected_gbps=400),
    ]
    detail = conditions(node(nics=nics), lay)["link-starved"]
    assert detail == (
        "mlx5_2 down; mlx5_3 missing; mlx5_0 carries 97 % of infiniband traffic at 380 of 400 Gb/s"
    )
    tracker = VerdictTracker()
    for t in range(11):
        out = tracker.apply([node(nics=nics)], lay, float(t))
    assert only(out, "link-starved").severity == "critical"


def test_balanced_healthy_ports_are_clean() -> None:
    lay = layout(nics=IB4)
    nics = [ib(f"mlx5_{i}", rx_gbps=300, tx_gbps=300) for i in range(4)]
    nics.append(NicView(name="eno1", kind="ethernet", state="down"))  # unlisted management port
    assert conditions(node(nics=nics), lay) == {}


def test_negotiated_below_expected_rate() -> None:
    lay = layout(nics=IB4)
    nics = [ib(f"mlx5_{i}") for i in range(3)] + [ib("mlx5_3", speed_gbps=200.0, slow=True)]  # slow: judged in nic_views
    assert conditions(node(nics=nics), lay)["link-starved"] == "mlx5_3 at 200 of 400 Gb/s"


def test_bond_on_fewer_members() -> None:
    bond = NicView(name="bond0", kind="bond", state="up", speed_gbps=100, members=["eth2", "eth3"],
                   members_up=1, rx_bytes_per_s=1e6, tx_bytes_per_s=1e6)
    c = node_conditions(node(nics=[bond]), {}, None, Thresholds(), 0.0)
    assert [(x.kind, x.detail, x.severity) for x in c] == [
        ("link-starved", "bond0 on 1 of 2 members", "critical")
    ]


def test_pile_needs_real_traffic() -> None:
    lay = layout(nics=IB4)
    nics = [ib("mlx5_0", rx_gbps=0.2, tx_gbps=0.2)] + [ib(f"mlx5_{i}", rx_gbps=0, tx_gbps=0) for i in (1, 2, 3)]
    assert conditions(node(nics=nics), lay) == {}


def test_near_line_rate_while_gpus_wait() -> None:
    lay = layout(nics=IB4)
    nics = [ib(f"mlx5_{i}", rx_gbps=380, tx_gbps=100) for i in range(4)]
    waiting = node(nics=nics, gpus=gpus(util=30.0))
    assert conditions(waiting, lay)["link-starved"].startswith(
        "mlx5_0 at 380 of 400 Gb/s while GPUs wait (mean util 30 %)"
    )
    busy = node(nics=nics, gpus=gpus(util=95.0))  # the GPUs keep up: a busy link, not a starved one
    assert conditions(busy, lay) == {}


def test_xmit_wait_rising_is_congestion_not_starvation() -> None:
    # congestion counters are the congested verdict's evidence, whether the GPUs wait or not
    lay = layout(nics=IB4[:2])
    nics = [ib("mlx5_0", xmit_wait_per_s=5e4), ib("mlx5_1")]
    for util in (20.0, 90.0):
        assert conditions(node(nics=nics, gpus=gpus(util=util)), lay) == {
            "congested": "mlx5_0 xmit_wait 50.0k/s (no pool baseline)"}


def test_bond_near_line_rate_while_gpus_wait() -> None:
    # the trial report: all traffic through one 100 Gb/s bond while the GPUs idle on it
    bond = NicView(name="bond0", kind="bond", state="up", speed_gbps=100, members=["eth2", "eth3"],
                   members_up=2, rx_bytes_per_s=97 * GB, tx_bytes_per_s=20 * GB)
    detail = conditions(node(nics=[bond], gpus=gpus(util=12.0)), layout())["link-starved"]
    assert detail == ("bond0 at 97 of 100 Gb/s while GPUs wait (mean util 12 %); "
                      "evidence: rate against line rate (no congestion counters read)")


def test_gpu_with_fewer_nvlinks_than_its_peers() -> None:
    g = [GpuView(index=i, util_pct=90, nvlink_links_total=18, nvlink_links_up=18) for i in range(8)]
    g[3] = GpuView(index=3, util_pct=90, nvlink_links_total=18, nvlink_links_up=16)
    assert conditions(node(gpus=g), layout())["link-starved"] == "GPU 3 has 16 of 18 NVLinks up"
    single = [GpuView(index=0, util_pct=90, nvlink_links_up=0)]  # nobody to compare with
    assert conditions(node(gpus=single), layout()) == {}


def test_npu_roce_ports() -> None:
    npus = [GpuView(index=i, kind="npu", util_pct=80, nvlink_links_up=7) for i in range(4)]
    npus[2] = GpuView(index=2, kind="npu", util_pct=80, nvlink_links_up=5)
    ports = [NicView(name=f"eth{i}", kind="npu-roce", state="up", accelerator_index=i, speed_gbps=200,
                     rx_bytes_per_s=GB, tx_bytes_per_s=GB) for i in range(4)]
    ports[1] = ports[1].model_copy(update={"state": "down"})
    ports[3] = ports[3].model_copy(update={"errors_per_s": 12.0})
    detail = conditions(node(gpus=npus, nics=ports), layout())["link-starved"]
    assert detail == "NPU 1 port eth1 down; eth3 errors rising (12.0/s); NPU 2 has 5 of 7 HCCS links up"


def test_reason_stays_one_line() -> None:
    lay = layout(nics=[NicExpectation(name=f"mlx5_{i}", expected_gbps=400) for i in range(8)])
    nics = [ib(f"mlx5_{i}", state="down", rx_gbps=0, tx_gbps=0) for i in range(8)]
    detail = conditions(node(nics=nics), lay)["link-starved"]
    assert detail.endswith("; +4 more") and "\n" not in detail


# --------------------------------------------------------------------------- straggler


def decode_pool(steps: Sequence[float], **kw: Any) -> list[NodeView]:
    return [node(f"decode-{i:02d}", engine=engine(steps=s), **kw) for i, s in enumerate(steps, 1)]


def test_straggler_below_role_median() -> None:
    pool = decode_pool([60.0, 59.0, 61.0, 42.0])
    lay = layout([n.name for n in pool])
    tracker = VerdictTracker()
    for t in range(11):
        out = tracker.apply(pool, lay, float(t))
    v = only(out, "straggler", "decode-04")
    assert v.detail == "42.0 decode steps/s, 71 % of the decode median 59.5 (4 nodes)"
    # the whole pool ($320/h) runs at the straggler's pace
    assert v.usd_per_hour_at_stake == pytest.approx(320.0 * (1 - 42.0 / 59.5))
    assert all(kinds(out, n) == [] for n in ("decode-01", "decode-02", "decode-03"))


def test_straggler_needs_three_reporting_peers_and_ignores_idle_ones() -> None:
    assert "straggler" not in conditions(decode_pool([60.0, 30.0])[1], layout(), decode_pool([60.0, 30.0]))
    pool = [*decode_pool([60.0, 30.0]), node("decode-03", engine=engine(steps=0.0, running=0.0))]
    assert "straggler" not in conditions(pool[1], layout(), pool)
    other_role = [*decode_pool([60.0, 30.0]), node("prefill-01", role="prefill", engine=engine(60.0))]
    assert "straggler" not in conditions(other_role[1], layout(), other_role)
    prefill = [node(f"prefill-0{i}", role="prefill", engine=engine(steps=s)) for i, s in enumerate((8, 8, 3))]
    assert "straggler" not in conditions(prefill[2], layout(), prefill)  # arrival-driven, not a straggler
    pool = decode_pool([60.0, 50.0, 55.0])  # 50 is 91 % of 55: within the ratio
    assert all("straggler" not in conditions(n, layout(), pool) for n in pool)


# --------------------------------------------------------------------------- throttled / gpu-error


def test_throttled_names_gpus_and_reasons() -> None:
    g = gpus(4)
    g[1] = GpuView(index=1, util_pct=90, clock_event_reasons=0x4 | 0x1)
    g[2] = GpuView(index=2, util_pct=90, clock_event_reasons=0x20 | 0x40)
    g[3] = GpuView(index=3, util_pct=90, clock_event_reasons=0x4)
    th = Thresholds(throttle_on_power_cap=True)
    c = node_conditions(node(gpus=g, cost_per_hour_usd=40.0), {}, None, th, 0.0)
    assert [(x.kind, x.detail) for x in c] == [
        ("throttled", "GPUs 1,3 SwPowerCap; GPU 2 SwThermal+HwThermal")
    ]
    assert c[0].usd_per_hour_at_stake == pytest.approx(30.0)  # 3 of 4 GPUs
    # by default a GPU at its power cap is working as designed, not throttled
    c = node_conditions(node(gpus=g, cost_per_hour_usd=40.0), {}, None, Thresholds(), 0.0)
    assert [(x.kind, x.detail) for x in c] == [("throttled", "GPU 2 SwThermal+HwThermal")]
    assert c[0].usd_per_hour_at_stake == pytest.approx(10.0)
    # GpuIdle (0x1) and application clocks (0x2) are not throttling
    assert conditions(node(gpus=gpus(clock_event_reasons=0x1 | 0x2)), layout()) == {}


def test_gpu_errors() -> None:
    g = gpus(4)
    g[0] = GpuView(index=0, util_pct=90, xid_last=79)
    g[2] = GpuView(index=2, healthy=False, error="GPU is lost")
    g[3] = GpuView(index=3, util_pct=90, xid_last=0)  # dcgm-exporter's "no XID"
    n = node(gpus=g, gpus_expected=8)
    assert conditions(n, layout())["gpu-error"] == (
        "GPU 0 XID 79; GPU 2 lost (GPU is lost); 4 of 8 GPUs visible"
    )


def test_uncorrected_ecc_counts_only_when_rising_during_the_session() -> None:
    lay = layout(hold_s=0, clear_s=0)
    tracker = VerdictTracker()

    def with_ecc(total: int) -> NodeView:
        return node(gpus=[GpuView(index=0, util_pct=90, ecc_uncorrected_total=total),
                          GpuView(index=1, util_pct=90, ecc_uncorrected_total=0)])

    assert kinds(tracker.apply([with_ecc(5)], lay, 0.0)) == []  # history, not news
    assert kinds(tracker.apply([with_ecc(5)], lay, 1.0)) == []
    assert only(tracker.apply([with_ecc(7)], lay, 2.0), "gpu-error").detail == "GPU 0 +2 uncorrected ECC"
    assert kinds(tracker.apply([with_ecc(1)], lay, 3.0)) == []  # counter reset: new baseline


# --------------------------------------------------------------------------- status, order


def test_status_verdicts_show_at_once_and_hide_stale_evidence() -> None:
    lay = layout(hold_s=2, clear_s=2)
    tracker = VerdictTracker()
    hot = node(gpus=gpus(clock_event_reasons=0x40))
    for t in range(3):
        out = tracker.apply([hot], lay, float(t))
    assert kinds(out) == ["throttled"]
    gone = hot.model_copy(update={"status": "unreachable", "age_s": 6.0, "error": "ssh: timed out"})
    v = only(tracker.apply([gone], lay, 10.0), "unreachable")
    assert v.severity == "critical" and v.since == 4.0
    assert v.detail == "no fresh sample for 6 s: ssh: timed out"
    # back: the established verdict returns without a new hold, the status clears at once
    assert kinds(tracker.apply([hot], lay, 11.0)) == ["throttled"]


def test_stale_node_never_starts_a_new_verdict() -> None:
    lay = layout(hold_s=0)
    tracker = VerdictTracker()
    stale = node(gpus=gpus(clock_event_reasons=0x40), status="stale", age_s=3.0)
    out = tracker.apply([stale], lay, 5.0)
    assert kinds(out) == ["stale"] and only(out, "stale").severity == "warning"


def test_hunt_order_by_severity_then_money() -> None:
    def v(kind: str, severity: str, usd: float | None) -> VerdictView:
        return VerdictView(kind=kind, detail="", severity=severity, usd_per_hour_at_stake=usd)  # type: ignore[arg-type]

    nodes = [
        node("a", verdicts=[v("idle", "warning", 80.0), v("throttled", "warning", None)]),
        node("b", verdicts=[v("straggler", "warning", 200.0)]),
        node("c", verdicts=[v("gpu-error", "critical", 10.0)]),
    ]
    assert [(n.name, x.kind) for n, x in hunt_order(nodes)] == [
        ("c", "gpu-error"), ("b", "straggler"), ("a", "idle"), ("a", "throttled")
    ]


def test_nodes_leaving_the_layout_forget_their_state() -> None:
    lay = layout(hold_s=5)
    tracker = VerdictTracker()
    hot = node(gpus=gpus(clock_event_reasons=0x40))
    tracker.apply([hot], lay, 0.0)
    tracker.apply([], lay, 3.0)
    assert kinds(tracker.apply([hot], lay, 6.0)) == []  # the hold starts again


def test_straggler_names_its_expert_load_balance_where_sglang_exposes_it() -> None:
    pool = decode_pool([60.0, 59.0, 61.0])
    pool.append(node("decode-04", engine=engine(steps=42.0, expert_balancedness=0.62)))
    lay = layout([n.name for n in pool])
    tracker = VerdictTracker()
    for t in range(11):
        out = tracker.apply(pool, lay, float(t))
    v = only(out, "straggler", "decode-04")
    assert v.detail.endswith("(4 nodes); expert load balance 62 % (mean ÷ max)")
