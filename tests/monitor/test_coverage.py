"""Coverage from plain samples and views: what the layout expects, what is unknown, and
the reason, one line each; the blind verdict through the tracker (hold, clear, never for
a node that is not answering)."""

from __future__ import annotations

from typing import Any

import pytest

from infertop.collectors.sample import GpuSample, NicSample, NodeSample, PageOutcome
from infertop.layouts import LayoutError, parse_layout
from infertop.layouts.model import EngineConfig, Layout, NicExpectation, NodeConfig, Thresholds
from infertop.monitor.evaluation.conditions import BLIND, blind_condition
from infertop.monitor.evaluation.coverage import node_coverage, part_reason
from infertop.monitor.evaluation.verdicts import VerdictTracker
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import CoverageGap, EngineView, GpuView, NicView, NodeView

NODE_URL = "http://decode-01:9100/metrics"
DCGM_URL = "http://decode-01:9400/metrics"
ENGINE_URL = "http://decode-01:8000/metrics"
THROTTLE_UNSEEN = "dcgm-exporter does not collect DCGM_FI_DEV_CLOCKS_EVENT_REASONS"


def config(**kw: Any) -> NodeConfig:
    kw.setdefault("gpus", 8)
    kw.setdefault("nics", [NicExpectation(name="mlx5_0"), NicExpectation(name="mlx5_1")])
    kw.setdefault("engine", EngineConfig(url=ENGINE_URL))
    return NodeConfig(name="decode-01", **kw)


def page(kind: Any, url: str, error: str | None = None, parts: tuple[str, ...] = ()) -> PageOutcome:
    return PageOutcome(kind=kind, url=url, ok=error is None, error=error, parts=parts)


def sample(**kw: Any) -> NodeSample:
    return NodeSample(node="decode-01", source=kw.pop("source", "scrape"), taken_at=100.0, **kw)


def gpu_views(n: int = 8, **kw: Any) -> list[GpuView]:
    kw.setdefault("clock_event_reasons", 0)
    return [GpuView(index=i, util_pct=80.0, **kw) for i in range(n)]


def port(name: str, state: str | None = "active", **kw: Any) -> NicView:
    return NicView(name=name, kind="infiniband", state=state, **kw)


ALL_PORTS = [port("mlx5_0"), port("mlx5_1")]
ENGINE = EngineView(decode_steps_per_s=40.0)


def details(gaps: list[CoverageGap]) -> list[str]:
    return [g.detail for g in gaps]


def test_a_fully_seen_node_has_no_gaps() -> None:
    latest = [sample(gpus=[GpuSample(index=0)], nics=[], pages=[page("node_exporter", NODE_URL, parts=("nics",))])]
    assert node_coverage(config(), latest, gpu_views(), ALL_PORTS, ENGINE) == []


def test_failed_node_exporter_page_makes_the_expected_links_unknown_with_its_reason() -> None:
    error = f"cannot connect to {NODE_URL}"
    latest = [sample(
        gpus=[GpuSample(index=0)],
        pages=[page("engine", ENGINE_URL, parts=("engine",)), page("dcgm-exporter", DCGM_URL, parts=("gpus",)),
               page("node_exporter", NODE_URL, error, parts=("nics",))],
    )]
    # what nic_views gives for expected ports nobody reported: unknown, kind "other"
    unknown = [NicView(name="mlx5_0", kind="other"), NicView(name="mlx5_1", kind="other")]
    gaps = node_coverage(config(), latest, gpu_views(), unknown, ENGINE)
    assert details(gaps) == [f"links unknown: node_exporter page failed ({error})"]
    assert gaps[0].kind == "ports"


def test_a_page_that_never_read_right_is_still_blamed_for_the_ports() -> None:
    # an exporter on an unusual port that has never answered: its parts are not known,
    # but it is the only explanation there is
    error = "HTTP 503 from http://decode-01:7777/metrics"
    latest = [sample(gpus=[GpuSample(index=0)], pages=[page("exporter", "http://decode-01:7777/metrics", error)])]
    gaps = node_coverage(config(engine=None), latest, gpu_views(), [], None)
    assert details(gaps) == [f"links unknown: exporter page failed ({error})"]


def test_no_source_for_ports_at_all_says_so() -> None:
    latest = [sample(gpus=[GpuSample(index=0)], pages=[page("dcgm-exporter", DCGM_URL, parts=("gpus",))])]
    gaps = node_coverage(config(engine=None), latest, gpu_views(), [], None)
    assert details(gaps) == ["links unknown: no source reads ports (read by: scrape)"]


def test_only_the_ports_without_a_state_are_named() -> None:
    latest = [sample(gpus=[GpuSample(index=0)], nics=[NicSample(name="mlx5_0"), NicSample(name="mlx5_1")])]
    nics = [port("mlx5_0"), port("mlx5_1", state=None)]
    assert details(node_coverage(config(), latest, gpu_views(), nics, ENGINE)) == [
        "port mlx5_1 unknown: scrape reports no state for it"
    ]


def test_a_missing_or_down_port_is_link_starved_not_blind() -> None:
    latest = [sample(gpus=[GpuSample(index=0)], nics=[NicSample(name="mlx5_0", state="down")])]
    nics = [port("mlx5_0", state="down"), NicView(name="mlx5_1", kind="other", state="missing")]
    assert node_coverage(config(), latest, gpu_views(), nics, ENGINE) == []


def test_an_expected_rate_without_a_speed_cannot_be_judged() -> None:
    cfg = config(nics=[NicExpectation(name="mlx5_0", expected_gbps=400)])
    latest = [sample(source="ssh", gpus=[GpuSample(index=0)], nics=[NicSample(name="mlx5_0", state="active")])]
    gaps = node_coverage(cfg, latest, gpu_views(), [port("mlx5_0")], ENGINE)
    assert [(g.kind, g.detail) for g in gaps] == [("port_speed", "port mlx5_0 speed unknown: ssh reports none")]


def test_gpus_expected_but_none_seen() -> None:
    error = f"no answer from {DCGM_URL} within 0.85 s"
    failed = [sample(nics=[], pages=[page("dcgm-exporter", DCGM_URL, error, parts=("gpus",))])]
    assert details(node_coverage(config(), failed, [], ALL_PORTS, ENGINE)) == [
        f"GPUs unknown (0 of 8 seen): dcgm-exporter page failed ({error})"
    ]
    # the probe on a node without a driver: its own note is the reason
    note = "no NVIDIA driver: no GPU figures (NVMLError_LibraryNotFound)"
    probe = [sample(source="ssh", gpus=[], nics=[], notes=[note])]
    assert details(node_coverage(config(), probe, [], ALL_PORTS, ENGINE)) == [f"GPUs unknown (0 of 8 seen): {note}"]
    npu = config(accelerator="npu", gpus=16)
    assert details(node_coverage(npu, [sample(source="ssh", gpus=[], nics=[])], [], ALL_PORTS, ENGINE)) == [
        "NPUs unknown (0 of 16 seen): ssh reports no accelerators"
    ]


def test_fewer_gpus_than_expected_is_a_gpu_error_not_blind() -> None:
    latest = [sample(gpus=[GpuSample(index=0)], nics=[])]
    assert node_coverage(config(), latest, gpu_views(3), ALL_PORTS, ENGINE) == []


def test_engine_expected_but_its_page_failed() -> None:
    error = f"no answer from {ENGINE_URL} within 0.85 s"
    latest = [sample(gpus=[GpuSample(index=0)], nics=[], pages=[
        page("engine", ENGINE_URL, error, parts=("engine",)),
        page("exporter", "http://decode-01:7777/metrics", "HTTP 500 from http://decode-01:7777/metrics"),
    ])]
    # the unnamed exporter page is never blamed for the engine
    assert details(node_coverage(config(), latest, gpu_views(), ALL_PORTS, None)) == [
        f"engine unknown: engine page failed ({error})"
    ]
    # a log the probe cannot read: its note
    log_cfg = config(engine=EngineConfig(log="/var/log/vllm.log"))
    note = "engine log: /var/log/vllm.log: PermissionError"
    probe = [sample(source="ssh", gpus=[GpuSample(index=0)], nics=[], notes=[note])]
    assert details(node_coverage(log_cfg, probe, gpu_views(), ALL_PORTS, None)) == [f"engine unknown: {note}"]
    # a readable log with no stats line yet
    quiet = [sample(source="ssh", gpus=[GpuSample(index=0)], nics=[])]
    assert details(node_coverage(log_cfg, quiet, gpu_views(), ALL_PORTS, None)) == [
        "engine unknown: no stats line parsed from its log yet"
    ]
    # an engine URL that no source reads (no page outcome, no note)
    assert details(node_coverage(config(), quiet, gpu_views(), ALL_PORTS, None)) == [
        "engine unknown: no source reads engine figures (read by: ssh)"
    ]


def test_clock_event_reasons_unknown_say_why() -> None:
    latest = [sample(gpus=[GpuSample(index=0)], nics=[], unseen={"clock_events": THROTTLE_UNSEEN})]
    blind_clocks = gpu_views(clock_event_reasons=None)
    assert details(node_coverage(config(), latest, blind_clocks, ALL_PORTS, ENGINE)) == [
        f"throttle unknown: {THROTTLE_UNSEEN}"
    ]
    # a source that does not say why: which source it is
    plain = [sample(source="prom", gpus=[GpuSample(index=0)], nics=[])]
    assert details(node_coverage(config(), plain, blind_clocks, ALL_PORTS, ENGINE)) == [
        "throttle unknown: prom reports no clock-event reasons"
    ]
    # read (0 = no event) is seen, whatever a stale `unseen` says
    assert node_coverage(config(), latest, gpu_views(), ALL_PORTS, ENGINE) == []
    # Ascend NPUs have no clock-event reasons to read
    npus = gpu_views(kind="npu", clock_event_reasons=None)
    assert node_coverage(config(accelerator="npu"), plain, npus, ALL_PORTS, ENGINE) == []


def test_what_a_source_says_it_cannot_see() -> None:
    unseen = {"nvlink": "dcgm-exporter does not collect DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
              "nic_errors": "node_exporter has no infiniband collector", "hccs": "npu-exporter v26 has none"}
    latest = [sample(gpus=[GpuSample(index=0)], nics=[], unseen=unseen)]
    assert details(node_coverage(config(), latest, gpu_views(), ALL_PORTS, ENGINE)) == [
        f"NVLink unknown: {unseen['nvlink']}",
        f"port errors unknown: {unseen['nic_errors']}",
        f"hccs unknown: {unseen['hccs']}",
    ]
    # only what the layout expects: no GPUs expected, no NVLink to miss; no ports, no errors
    bare = config(gpus=None, nics=[])
    assert details(node_coverage(bare, latest, gpu_views(), [], ENGINE)) == [f"hccs unknown: {unseen['hccs']}"]


def test_nothing_expected_is_never_blind() -> None:
    # the local machine with no layout, or a node the layout says nothing about
    latest = [sample(source="local", gpus=[], nics=[], unseen={"nvlink": "x"})]
    assert node_coverage(None, latest, [], [], None) == []
    local = NodeConfig(name="localhost", local=True)
    assert node_coverage(local, latest, [], [], None) == []


def test_most_important_first() -> None:
    latest = [sample(source="prom", nics=[], unseen={"nvlink": "not collected"})]
    cfg = config()
    gaps = node_coverage(cfg, latest, [], [port("mlx5_0"), port("mlx5_1", state=None)], None)
    assert [g.kind for g in gaps] == ["gpus", "ports", "engine", "nvlink"]


def test_reasons_never_carry_secrets() -> None:
    outcome = page("node_exporter", "http://admin:hunter22@decode-01:9100/metrics?token=abcdef123",
                   "cannot connect to http://admin:hunter22@decode-01:9100/metrics?token=abcdef123", ("nics",))
    assert "hunter22" not in outcome.url and "abcdef123" not in outcome.url
    assert "hunter22" not in part_reason("nics", [sample(pages=[outcome])])
    assert "abcdef123" not in part_reason("nics", [sample(pages=[outcome])])


def blind_node(**kw: Any) -> NodeView:
    kw.setdefault("status", "ok")
    kw.setdefault("age_s", 0.5)
    kw.setdefault("coverage", [
        CoverageGap(kind="ports", detail="links unknown: node_exporter page failed (cannot connect to …)"),
        CoverageGap(kind="clock_events", detail=f"throttle unknown: {THROTTLE_UNSEEN}"),
    ])
    return NodeView(name="decode-01", role="decode", gpus=gpu_views(), cost_per_hour_usd=80.0, **kw)


def test_blind_condition_joins_the_reasons_most_important_first() -> None:
    cond = blind_condition(blind_node(), Thresholds())
    assert cond is not None and cond.kind == BLIND and cond.severity == "warning"
    assert cond.detail == (
        f"links unknown: node_exporter page failed (cannot connect to …); throttle unknown: {THROTTLE_UNSEEN}"
    )
    assert cond.usd_per_hour_at_stake is None  # what cannot be seen has no known price
    assert blind_condition(blind_node(coverage=[]), Thresholds()) is None


def test_acknowledged_gaps_stay_listed_but_raise_nothing() -> None:
    lay = parse_layout("""
[thresholds]
blind_ignore = ["clock_events"]

[[nodes]]
name = "decode-01"
gpus = 8
""")
    cond = blind_condition(blind_node(), lay.thresholds)
    assert cond is not None and cond.detail == "links unknown: node_exporter page failed (cannot connect to …)"
    only_clocks = blind_node(coverage=[CoverageGap(kind="clock_events", detail="throttle unknown: x")])
    assert blind_condition(only_clocks, lay.thresholds) is None
    with pytest.raises(LayoutError, match="blind_ignore"):
        parse_layout('[thresholds]\nblind_ignore = ["Clock Events; rm -rf"]\n[[nodes]]\nname = "n"\n')


def test_blind_holds_and_clears_like_the_others_and_is_never_a_stale_nodes_second_fault() -> None:
    lay = Layout(thresholds=Thresholds(hold_s=10.0, clear_s=10.0),
                 nodes=[NodeConfig(name="decode-01", role="decode", gpus=8)])
    tracker = VerdictTracker()

    def kinds(n: NodeView, t: float) -> list[str]:
        return [v.kind for v in tracker.apply([n], lay, t)[0].verdicts]

    assert kinds(blind_node(), 0.0) == []
    assert kinds(blind_node(), 9.0) == []
    assert kinds(blind_node(), 10.0) == ["blind"]
    # the node stops answering: its status is the fault, not a second "blind"
    assert kinds(blind_node(status="stale", age_s=3.0), 11.0) == ["stale"]
    assert kinds(blind_node(status="error", error="cannot connect", age_s=3.0), 12.0) == ["error"]
    assert kinds(blind_node(), 13.0) == ["blind"]
    clear = blind_node(coverage=[])
    assert kinds(clear, 14.0) == ["blind"]
    assert kinds(clear, 23.0) == ["blind"]
    assert kinds(clear, 24.0) == []


def test_a_node_that_stops_answering_is_its_status_alone() -> None:
    """Through the monitor: blind while its other page answers; once every page fails the
    node is `error`, and neither the verdicts nor its coverage say blind as well."""
    lay = parse_layout("""
[cluster]
interval_s = 1.0

[thresholds]
hold_s = 2
clear_s = 2

[[nodes]]
name = "decode-01"
gpus = 1
nics = [{ name = "mlx5_0" }]
""")
    monitor = Monitor(lay, sources=[], clock=lambda: 0.0)
    error = f"cannot connect to {NODE_URL}"
    half = [page("dcgm-exporter", DCGM_URL, parts=("gpus",)), page("node_exporter", NODE_URL, error, parts=("nics",))]

    def frame(t: float, **kw: Any) -> NodeView:
        monitor.fleet.ingest(NodeSample(node="decode-01", source="scrape", taken_at=t, **kw))
        return monitor.tick(now=t + 0.01).nodes[0]

    gpu = [GpuSample(index=0, util_pct=80.0, clock_event_reasons=0)]
    views = [frame(float(t), gpus=gpu, pages=half) for t in range(4)]
    assert [v.kind for v in views[-1].verdicts] == ["blind"]
    assert [g.kind for g in views[-1].coverage] == ["ports"]
    failed = frame(4.0, error=f"HTTP 500 from {DCGM_URL} (and 1 more)", pages=half)
    assert failed.status == "error"
    assert [v.kind for v in failed.verdicts] == ["error"] and failed.coverage == []
