"""Detail in proportion through a real Prometheus (collectors/sources/prom_detail.py): on a
fleet past the small-fleet size, a tick reads every node's engine and host figures but the
per-GPU series only of the nodes in view, flagged by a verdict, or reached by the rotation;
every node's detail comes within the bound, and the idle node is still found with nothing
false. The plan's sizes are shrunk to 8 nodes (rotation past 4 nodes, every node within
4 s) so that a handful of simulated nodes stands for a large fleet."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Iterator

import pytest

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.prom import PromSource
from infertop.collectors.sources.prom_detail import DetailPlan
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.prometheus_server import PrometheusServer, SimNode, SimRates, prometheus_available
from tests.support.waiting import until_async

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
]

NODES = tuple(f"decode-0{i}" for i in range(1, 9))
IDLE_NODE = "decode-05"
IN_VIEW = "decode-02"
EVERY_S = 4.0


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    # GPU i reads util_pct - i: 8 % down to 1 % (SM activity the same), under the layout's
    # 10 %, and no engine work
    idle = SimRates(util_pct=8.0, sm_active=0.08, steps_per_s=0.0, drafts_per_s=0.0, draft_tokens_per_s=0.0, accepted_per_s=0.0,
                    accepted_by_position_per_s=(0.0, 0.0, 0.0), generation_per_s=0.0, prompt_per_s=0.0,
                    running=0.0, waiting=0.0)
    nodes = [SimNode(n, idle if n == IDLE_NODE else None).start() for n in NODES]
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [n.target() for n in nodes])
    server.start()
    server.wait_for_series("DCGM_FI_DEV_GPU_UTIL", len(nodes) * 8)
    yield server
    server.stop()
    for n in nodes:
        n.stop()


def layout_text(url: str) -> str:
    listed = "".join(f'\n[[nodes]]\nname = "{n}"\nrole = "decode"\ngpus = 8\n' for n in NODES)
    return f"""
[cluster]
name = "prom-detail"
interval_s = 1.0
window_s = 4.0

[pricing]
gpu_hour_usd = 2.0

[thresholds]
idle_util_pct = 10
stale_intervals = 4
unreachable_intervals = 8
hold_s = 2
clear_s = 2
idle_hold_s = 3

[prometheus]
url = "{url}"
backfill_s = 0
{listed}
"""


async def test_detail_in_proportion(prom: PrometheusServer) -> None:
    monitor = Monitor(parse_layout(layout_text(prom.url)))
    source = monitor.sources[0]
    assert isinstance(source, PromSource)
    source.detail_small_nodes = 4
    source.detail_every_s = EVERY_S
    monitor.set_in_view({IN_VIEW})
    plans: list[DetailPlan] = []
    series: list[int] = []
    round_at: list[float] = []
    gpu_arrivals: dict[str, list[float]] = {n: [] for n in NODES}
    snapshots: list[Snapshot] = []

    def heard(_: object) -> None:
        assert source.detail is not None
        plans.append(source.detail)
        series.append(source.series_read)
        round_at.append(time.monotonic())

    def sample_in(sample: NodeSample) -> None:
        if sample.source == "prom:gpu" and sample.node in gpu_arrivals:
            gpu_arrivals[sample.node].append(time.monotonic())

    source.round_listeners.append(heard)
    monitor.fleet.listeners.append(sample_in)
    monitor.listeners.append(snapshots.append)
    await monitor.start()
    try:
        def idle_found_and_kept() -> bool:
            flagged_since = next((i for i, s in enumerate(snapshots)
                                  if any(v.kind == "idle" for n in s.nodes if n.name == IDLE_NODE
                                         for v in n.verdicts)), None)
            return flagged_since is not None and len(snapshots) - flagged_since >= 6 and len(plans) >= 12
        def where() -> str:
            last = snapshots[-1] if snapshots else None
            node = next((n for n in last.nodes if n.name == IDLE_NODE), None) if last else None
            return (f"{len(snapshots)} frames, {len(plans)} rounds; {IDLE_NODE}: "
                    f"{node.model_dump_json(include={'status', 'verdicts', 'gpu_util_pct', 'engine'}) if node else None}")
        await until_async(idle_found_and_kept, 90, "the idle node found and six ticks more", detail=where)
        rotation_series = list(series)
        rotation_plans = list(plans)
        # the same fleet read whole every tick, for the count of series it costs
        source.detail_small_nodes = 64
        rounds = len(plans)
        await until_async(lambda: len(plans) >= rounds + 3, 30, "three rounds read whole")
        whole_series = series[-2:]
    finally:
        await monitor.stop()

    # a tick reads some nodes' detail, not all: the in-view node every tick from the
    # second, the idle one every tick once its verdict flags it
    assert rotation_plans[0].nodes is None  # the first tick reads every node
    for plan in rotation_plans[1:]:
        assert plan.nodes is not None and plan.count < len(NODES) and plan.total == len(NODES)
        assert plan.every_s == EVERY_S
    assert all(IN_VIEW in p.nodes for p in rotation_plans[2:] if p.nodes is not None)
    flagged_at = next(i for i, s in enumerate(snapshots)
                      if any(v.kind == "idle" for n in s.nodes if n.name == IDLE_NODE for v in n.verdicts))
    later = [p for p in rotation_plans[flagged_at + 2:] if p.nodes is not None]
    assert later and all(IDLE_NODE in p.nodes for p in later)
    # and so fewer series than reading every node whole
    assert statistics.median(rotation_series[2:]) < min(whole_series)
    # every node's detail within the bound: asked at least every 4 rounds (4 s at 1 s a
    # round; a round this loaded machine runs late stretches it by as much), and answered
    slices = int(EVERY_S / 1.0)
    for name, arrivals in gpu_arrivals.items():
        asked = [i for i, p in enumerate(rotation_plans) if p.nodes is None or name in p.nodes]
        assert max(b - a for a, b in itertools.pairwise(asked)) <= slices, (name, asked)
        assert len(rotation_plans) - 1 - asked[-1] < slices, (name, asked)
        assert len(arrivals) >= len(rotation_plans) // slices, (name, len(arrivals))
    # found with nothing false: every node ok, the idle node idle, no other warning
    last = {n.name: n for n in snapshots[-1].nodes}
    assert all(n.status == "ok" for n in last.values()), {n.name: n.status for n in last.values()}
    for name, node in last.items():
        kinds = {v.kind for v in node.verdicts if v.severity != "info"}
        assert kinds == ({"idle"} if name == IDLE_NODE else set()), (name, node.verdicts)
    # the frame says how much detail it read; a rotated node's per-GPU figures carry their age
    shown = [s for s in snapshots if s.detail is not None and s.detail.every_s is not None]
    assert shown and shown[0].detail is not None
    assert shown[0].detail.of == len(NODES) and shown[0].detail.note.endswith("every node within 4 s")
    aged = [n.gpus_age_s for s in snapshots[3:] for n in s.nodes
            if n.name not in (IN_VIEW, IDLE_NODE) and n.gpus_age_s is not None]
    # as old as 4 rounds (as far apart as this machine ran them) and a scrape
    longest_round_s = max(b - a for a, b in itertools.pairwise(round_at))
    assert aged and max(aged) <= slices * longest_round_s + 2.0
    assert all(n.gpus_age_s is None for s in snapshots[flagged_at + 3:] for n in s.nodes if n.name == IN_VIEW)
