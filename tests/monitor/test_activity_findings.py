"""Real compute activity in the judgement (issue 35): dcgm-exporter 4.5.3-4.8.2 pages built
from its definitions (tests/support/upstream_pages.py, the recommended counters of
docs/dcgm-counters.csv) with SM activity beside util; a GPU busy by util but idle by SM
activity is not counted as working, and the finding names the rank that holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import GpuSample, NodeSample
from infertop.layouts.model import Thresholds
from infertop.monitor.evaluation.activity import idle_basis
from infertop.monitor.evaluation.conditions import BUSY_WAITING, STRAGGLER, Condition, idle_condition
from infertop.monitor.evaluation.engine_ranks import rank_views
from infertop.monitor.evaluation.figures import engine_view, gpu_views, idle_fraction
from infertop.monitor.evaluation.rank_findings import (
    busy_waiting_condition,
    name_straggler_rank,
    rank_straggler_condition,
    straggling_rank,
)
from infertop.monitor.snapshot import NodeView
from tests.support.upstream_pages import dcgm_page
from tests.support.vllm_ranks_page import VllmRanksServer

CSV = Path(__file__).resolve().parents[2] / "docs" / "dcgm-counters.csv"
TH = Thresholds()


def _gpu(index: int, util: float, sm_active: float | None) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "index": index, "uuid": f"GPU-0000000{index}-5f60-7182-93a4-b5c6d7e8f900",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0", "model": "NVIDIA H200", "util_pct": util,
        "power_w": 400.0, "temp_c": 60, "sm_clock_mhz": 1980, "mem_used_bytes": 100 << 30,
        "fb_free_mib": 30000, "fb_reserved_mib": 615, "xid_last": 0, "clock_event_reasons": 0,
        "ecc_uncorrected_total": 0, "nvlink_errors_total": 0, "nvlink_bytes_per_s": 0,
    }
    if sm_active is None:  # not collected: no series on the page
        gpu.update(sm_active_pct=None, sm_occupancy_pct=None, tensor_active_pct=None, dram_active_pct=None)
    else:
        gpu.update(sm_active_pct=sm_active, sm_occupancy_pct=sm_active / 3, tensor_active_pct=sm_active * 0.6,
                   dram_active_pct=sm_active / 2)
    return gpu


def _gpus(utils_and_activity: list[tuple[float, float | None]]) -> list[GpuSample]:
    truth = {"hostname": "decode-05", "driver": "580.65.06",
             "gpus": [_gpu(i, u, a) for i, (u, a) in enumerate(utils_and_activity)]}
    parts = parts_from_exporter(parse_exposition(dcgm_page(truth, CSV), "dcgm", wanted=EXPORTER_WANTED))
    gpus = parts["gpus"]
    assert isinstance(gpus, list)
    return gpus


def _node(gpus: list[GpuSample], steps: list[float] | None = None, cost: float = 80.0) -> NodeView:
    samples = [NodeSample(node="decode-05", source="scrape", taken_at=1000.0, gpus=gpus)]
    engine = None
    if steps is not None:
        server = VllmRanksServer(engines=len(steps))
        server.advance_ranks(10.0, steps, [0.7] * len(steps), [0.03] * len(steps))
        first = engine_sample_from_text(server.page(), "vllm")
        server.advance_ranks(10.0, steps, [0.7] * len(steps), [0.03] * len(steps))
        window = [NodeSample(node="decode-05", source="scrape", taken_at=t, engine=e)
                  for t, e in ((1000.0, first), (1010.0, engine_sample_from_text(server.page(), "vllm")))]
        view = engine_view(window, now=1010.0)
        assert view is not None
        engine = view.model_copy(update={"ranks": rank_views(window, 1010.0, len(gpus), len(gpus) // len(steps))})
    views = gpu_views(samples)
    return NodeView(name="decode-05", role="decode", status="ok", gpus=views, engine=engine,
                    cost_per_hour_usd=cost, idle_basis=idle_basis(views))


def test_dcgm_activity_reaches_the_gpu_view_with_its_source() -> None:
    gpus = _gpus([(100.0, 91.25), (3.0, 1.5)])
    assert [g.activity_source for g in gpus] == ["dcgm", "dcgm"]
    views = gpu_views([NodeSample(node="n", source="scrape", taken_at=0.0, gpus=gpus)])
    assert views[0].sm_active_pct == 91.25 and views[0].tensor_active_pct == 91.25 * 0.6
    assert views[1].sm_active_pct == 1.5 and views[1].dram_active_pct == 0.75


def test_a_spinning_gpu_is_not_working_for_idle_fraction_and_says_so() -> None:
    spinning = _gpus([(100.0, 0.8)] * 8)  # util 100 %, the H100's `torch.cuda._sleep` figure
    samples = [NodeSample(node="n", source="scrape", taken_at=float(t), gpus=spinning) for t in range(5)]
    assert idle_fraction(samples, TH.idle_util_pct) == 1.0
    assert idle_basis(spinning) == "sm_active"
    # without SM activity the same util reads as work, and the basis says util
    util_only = _gpus([(100.0, None)] * 8)
    samples = [NodeSample(node="n", source="scrape", taken_at=float(t), gpus=util_only) for t in range(5)]
    assert idle_fraction(samples, TH.idle_util_pct) == 0.0
    assert idle_basis(util_only) == "util"
    assert idle_basis(_gpus([(100.0, 0.8), (100.0, None)])) == "sm_active+util"


def test_idle_verdict_on_activity_names_its_basis() -> None:
    node = _node(_gpus([(100.0, 0.5)] * 8))
    found = idle_condition(node, TH)
    assert found is not None and "SM activity" in found.detail and "8 GPUs at ≤ 0 %" in found.detail


def test_busy_but_waiting_names_the_rank_holding_the_gpus() -> None:
    # 4 engines of TP 2 on 8 GPUs; engine 1's GPUs (2–3) spin: util 100 %, SM active ~1 %
    gpus = _gpus([(100.0, 88.0), (100.0, 90.0), (100.0, 1.0), (100.0, 1.2), (100.0, 91.0), (100.0, 89.0),
                  (100.0, 90.0), (100.0, 88.5)])
    node = _node(gpus, steps=[30.0] * 4)
    found = busy_waiting_condition(node, TH)
    assert isinstance(found, Condition) and found.kind == BUSY_WAITING
    assert "decode-05 engine 1 (GPUs 2–3)" in found.detail and "GPUs 2,3 util 100 % but SM active 1 %" in found.detail
    assert found.usd_per_hour_at_stake == 80.0 * 2 / 8
    # the node is busy, so never idle
    assert idle_condition(node, TH) is None
    # util alone cannot tell: no finding without SM activity
    assert busy_waiting_condition(_node(_gpus([(100.0, None)] * 8), steps=[30.0] * 4), TH) is None


def test_a_lockstep_straggler_is_the_rank_computing_while_the_others_wait() -> None:
    # same steps/s everywhere (lockstep); engine 3's GPUs work, the others mostly wait
    gpus = _gpus([(100.0, 30.0), (100.0, 31.0), (100.0, 29.0), (100.0, 30.5), (100.0, 30.0), (100.0, 29.5),
                  (100.0, 92.0), (100.0, 93.0)])
    node = _node(gpus, steps=[30.0] * 4)
    rank = straggling_rank(node)
    assert rank is not None and rank.label == "engine 3 (GPUs 6–7)"
    named = name_straggler_rank(node, Condition(STRAGGLER, "20.0 decode steps/s, 60 % of the decode median",
                                                "warning", 10.0))
    assert named is not None and named.detail.endswith("slowest rank decode-05 engine 3 (GPUs 6–7) 30.0 steps/s")


def test_a_slow_rank_within_its_node_is_a_straggler_by_itself() -> None:
    gpus = _gpus([(100.0, 90.0)] * 8)
    node = _node(gpus, steps=[30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 12.0, 30.0])
    found = rank_straggler_condition(node, TH)
    assert found is not None and found.kind == STRAGGLER
    assert found.detail.startswith("decode-05 engine 6 (GPU 6): 12.0 decode steps/s, 40 % of the median")
    assert rank_straggler_condition(_node(gpus, steps=[30.0] * 8), TH) is None
