"""Per-rank engines (issue 35): each data-parallel engine of a node with its own figures,
held within 2 % to the truth pages built from upstream definitions were driven with
(vLLM 0.33.0 `engine` label: tests/support/vllm_ranks_page.py; SGLang 0.5.23 `dp_rank` /
`tp_rank`: tests/fixtures/sglang_page.py); the node's own figures unchanged by them."""

from __future__ import annotations

import statistics

import pytest

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.monitor.evaluation.engine_ranks import gpu_span, node_steps_per_s, rank_views
from infertop.monitor.evaluation.figures import engine_view
from infertop.monitor.snapshot import EngineRankView, EngineView
from tests.support.sglang_page import SglangServer
from tests.support.vllm_ranks_page import VllmRanksServer

DT = 10.0
STEPS = [30.0, 30.0, 30.0, 30.0, 30.0, 18.0, 30.0, 30.0]  # engine 5 straggles
ACCEPT = [0.7, 0.72, 0.68, 0.7, 0.71, 0.5, 0.69, 0.7]
ITL = [0.03, 0.03, 0.03, 0.03, 0.03, 0.06, 0.03, 0.03]


def _samples(pages: list[str], profile: str) -> list[NodeSample]:
    return [NodeSample(node="decode-05", source="scrape", taken_at=1000.0 + k * DT,
                       engine=engine_sample_from_text(text, profile)) for k, text in enumerate(pages)]


def _vllm_window() -> tuple[VllmRanksServer, list[NodeSample], list[tuple[int, int, int, int, int]]]:
    server = VllmRanksServer(engines=8)
    server.advance_ranks(DT, STEPS, ACCEPT, [0.2] * 8)  # before the window: other latencies
    first = server.page()
    before = [(e.steps, e.generation_tokens, t.drafts, t.accepted, len(t.itl_s))
              for e, t in zip(server.engines, server.truth, strict=True)]
    server.advance_ranks(DT, STEPS, ACCEPT, ITL)
    return server, _samples([first, server.page()], "vllm"), before


def test_vllm_each_engine_has_its_own_figures_within_2_percent() -> None:
    server, samples, before = _vllm_window()
    ranks = rank_views(samples, now=1000.0 + DT, node_gpus=16, tp=2)
    assert ranks is not None and len(ranks) == 8
    for i, (rank, e, t, (steps0, tokens0, drafts0, accepted0, itl0)) in enumerate(
            zip(ranks, server.engines, server.truth, before, strict=True)):
        assert rank.dp_rank == i and rank.key == f"engine={i}"
        assert rank.gpus == [2 * i, 2 * i + 1] and rank.gpus_from == "layout"
        assert rank.label == f"engine {i} (GPUs {2 * i}–{2 * i + 1})"
        assert rank.decode_steps_per_s == pytest.approx((e.steps - steps0) / DT, rel=0.02)
        assert rank.accepted_tokens_per_s == pytest.approx((e.generation_tokens - tokens0) / DT, rel=0.02)
        drafts, accepted = t.drafts - drafts0, t.accepted - accepted0
        assert rank.draft_acceptance == pytest.approx(accepted / (drafts * server.k), rel=0.02)
        assert rank.mean_acceptance_length == pytest.approx(1 + accepted / drafts, rel=0.02)
        assert rank.full_acceptance_tokens_per_s == pytest.approx((drafts + drafts * server.k) / DT, rel=0.02)
        assert rank.requests_running == e.running and rank.requests_waiting == e.waiting
        assert rank.kv_cache_usage == pytest.approx(e.kv_cache_usage, rel=0.02)
        # percentiles come from buckets: the true median lies in the bucket the view names
        lower, upper = rank.latency_bounds_s["itl_p50"]
        true_p50 = statistics.median(t.itl_s[itl0:])  # the window's gaps only
        assert lower <= true_p50 <= (upper if upper is not None else float("inf"))
        assert rank.itl_p50_s is not None and lower <= rank.itl_p50_s <= (upper or float("inf"))
    slow = min(ranks, key=lambda r: r.decode_steps_per_s or 0.0)
    assert slow.dp_rank == 5 and slow.label == "engine 5 (GPUs 10–11)"
    assert slow.itl_p50_s is not None and slow.itl_p50_s > ranks[0].itl_p50_s  # type: ignore[operator]


def _strip_ranks(samples: list[NodeSample]) -> list[NodeSample]:
    out = []
    for s in samples:
        assert s.engine is not None
        out.append(s.model_copy(update={"engine": s.engine.model_copy(update={"ranks": None})}))
    return out


def test_node_figures_are_unchanged_by_the_ranks() -> None:
    _, samples, _ = _vllm_window()
    with_ranks = engine_view(samples, now=1000.0 + DT)
    without = engine_view(_strip_ranks(samples), now=1000.0 + DT)
    assert with_ranks is not None and without is not None
    assert with_ranks.model_dump() == without.model_dump()
    # and the node's tokens are its ranks' tokens, summed
    ranks = rank_views(samples, now=1000.0 + DT, node_gpus=16, tp=2)
    assert ranks is not None
    assert sum(r.accepted_tokens_per_s or 0.0 for r in ranks) == pytest.approx(with_ranks.accepted_tokens_per_s)
    assert max(r.decode_steps_per_s or 0.0 for r in ranks) == pytest.approx(with_ranks.decode_steps_per_s)


def test_sglang_dp_attention_ranks_name_their_gpus_from_tp_rank() -> None:
    server = SglangServer(dp=4, tp=4, all_schedulers=True, seed=7)
    server.advance(DT)
    first = server.page()
    before = [(r.decode_passes, r.decode_tokens) for r in server.truth.ranks]
    server.advance(DT, steps_per_s=40.0, idle_ranks=(2,))
    server.advance(DT / 2, steps_per_s=40.0, idle_ranks=(0, 1, 3))  # rank 2: half the passes
    samples = _samples([first, server.page()], "sglang")
    ranks = rank_views(samples, now=1000.0 + DT, node_gpus=8, tp=None)
    assert ranks is not None and [r.dp_rank for r in ranks] == [0, 1, 2, 3]
    for i, (rank, truth, (passes0, tokens0)) in enumerate(zip(ranks, server.truth.ranks, before, strict=True)):
        assert rank.gpus == [i] and rank.gpus_from == "labels"
        assert rank.label == f"engine {i} (GPU {i})"
        assert rank.decode_steps_per_s == pytest.approx((truth.decode_passes - passes0) / DT, rel=0.02)
        assert rank.accepted_tokens_per_s == pytest.approx((truth.decode_tokens - tokens0) / DT, rel=0.02)
        assert rank.requests_running == truth.running and rank.requests_waiting == truth.waiting
        assert rank.kv_cache_usage == pytest.approx(truth.token_usage, rel=0.02)
    assert ranks[2].decode_steps_per_s == pytest.approx(ranks[0].decode_steps_per_s / 2, rel=0.02)  # type: ignore[operator]


def test_gpus_unknown_without_labels_or_layout_and_past_the_node() -> None:
    _, samples, _ = _vllm_window()
    # 8 engines on 6 GPUs: no even share, no labels, no layout — unknown, not guessed
    unknown = rank_views(samples, now=1000.0 + DT, node_gpus=6, tp=None)
    assert unknown is not None and all(r.gpus is None and r.label == f"engine {r.dp_rank}" for r in unknown)
    # 8 engines on 16 GPUs: vLLM's DP launcher gives local rank k the k-th pair
    shared = rank_views(samples, now=1000.0 + DT, node_gpus=16, tp=None)
    assert shared is not None
    assert [(r.gpus, r.gpus_from) for r in shared] == [([2 * k, 2 * k + 1], "gpus/engines") for k in range(8)]
    assert shared[3].label == "engine 3 (GPUs 6–7)"
    # 8 engines of TP 2 do not fit 8 GPUs: the ones past the node are unknown, not wrapped
    past = rank_views(samples, now=1000.0 + DT, node_gpus=8, tp=2)
    assert past is not None
    assert [r.gpus for r in past[:4]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert all(r.gpus is None for r in past[4:])
    assert gpu_span([0, 2, 5]) == "GPUs 0, 2, 5" and gpu_span([3]) == "GPU 3" and gpu_span(None) == ""


def test_ranks_travel_in_the_snapshot_json_and_old_json_still_reads() -> None:
    _, samples, _ = _vllm_window()
    view = engine_view(samples, now=1000.0 + DT)
    ranks = rank_views(samples, now=1000.0 + DT, node_gpus=16, tp=2)
    assert view is not None and ranks is not None
    view = view.model_copy(update={"ranks": ranks})
    back = EngineView.model_validate_json(view.model_dump_json())
    assert back.ranks is not None and isinstance(back.ranks[5], EngineRankView)
    assert back.ranks[5].label == "engine 5 (GPUs 10–11)" and back.ranks[5].gpus == [10, 11]
    assert back.ranks[5].decode_steps_per_s == ranks[5].decode_steps_per_s
    old = view.model_dump(mode="json")
    del old["ranks"]
    assert EngineView.model_validate(old).ranks is None


def test_a_page_without_engine_labels_has_no_ranks() -> None:
    text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    sample = engine_sample_from_text(text, "vllm")
    assert isinstance(sample, EngineSample) and sample.ranks is None


def _rank(dp: int, steps: float | None, running: float = 8.0) -> EngineRankView:
    return EngineRankView(key=f"engine={dp}", dp_rank=dp, gpus=[dp], label=f"engine {dp} (GPU {dp})",
                          decode_steps_per_s=steps, requests_running=running)


@pytest.mark.parametrize(("steps", "running", "figure", "named"), [
    # issue 46: rank 5 at 16/s while its 7 peers step at 40/s — the node steps at 16
    ([40.0] * 5 + [16.1] + [40.0] * 2, [8.0] * 8, 16.1, "engine 5 (GPU 5)"),
    # lockstep (within 5 %): the slowest's figure, no rank named
    ([40.0, 39.5, 40.2, 39.9], [8.0] * 4, 39.5, None),
    # an idle rank (nothing running) steps with uncounted dummy batches: not the pace
    ([40.0, 0.0, 40.0, 40.0], [8.0, 0.0, 8.0, 8.0], 40.0, None),
    # no busy rank: the fastest engine's counted steps (the figure handed in)
    ([0.0, 0.0], [0.0, 0.0], 12.0, None),
])
def test_the_node_steps_at_its_slowest_busy_ranks_pace(
    steps: list[float], running: list[float], figure: float, named: str | None
) -> None:
    ranks = [_rank(i, s, r) for i, (s, r) in enumerate(zip(steps, running, strict=True))]
    value, slowest = node_steps_per_s(ranks, counted=12.0)
    assert value == figure
    assert (slowest.label if slowest is not None else None) == named
