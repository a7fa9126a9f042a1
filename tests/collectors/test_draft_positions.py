"""Acceptance per draft position: vLLM's per-position counters read from a page, summed
over engines and per engine, and the window's Δaccepted[i] ÷ Δdrafts (issue 43)."""

from __future__ import annotations

import math

import pytest

from infertop.collectors.pages.draft_positions import accepted_by_position
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.promql import QueryBuilder, by_position, engine_sample, subkeys
from infertop.monitor.evaluation.engine_ranks import rank_views
from infertop.monitor.evaluation.figures import engine_view
from tests.support.vllm_dp_page import NUM_SPECULATIVE_TOKENS, vllm_dp_page


def page(drafts: float, per_engine_positions: list[list[float]]) -> str:
    """A vLLM page of len(per_engine_positions) engines, MTP drafting k tokens."""
    lines = ["# TYPE vllm:spec_decode_num_drafts counter",
             "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
    for engine, positions in enumerate(per_engine_positions):
        k = len(positions)
        lines += [
            f'vllm:spec_decode_num_drafts_total{{engine="{engine}"}} {drafts}',
            f'vllm:spec_decode_num_draft_tokens_total{{engine="{engine}"}} {drafts * k}',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="{engine}"}} {sum(positions)}',
        ]
        for i, count in enumerate(positions):
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{engine}",position="{i}"}} {count}')
            # its _created sample: same prefix, never read as a count (metrics.md)
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_created{{engine="{engine}",position="{i}"}} 1.7e9')
    return "\n".join(lines) + "\n"


def test_counts_are_summed_per_position_over_engines_and_kept_per_engine() -> None:
    sample = engine_sample_from_text(page(100, [[80, 50, 20], [60, 30, 10]]), "vllm")
    assert sample.accepted_tokens_by_position_total == (140.0, 80.0, 30.0)
    assert [r.engine.accepted_tokens_by_position_total for r in sample.ranks or []] == [
        (80.0, 50.0, 20.0), (60.0, 30.0, 10.0)]


def test_a_realistic_page_yields_one_counter_per_configured_position() -> None:
    text, truth = vllm_dp_page(engines=8, seed=3)
    sample = engine_sample_from_text(text, "vllm")
    counts = sample.accepted_tokens_by_position_total
    assert counts is not None and len(counts) == NUM_SPECULATIVE_TOKENS
    expected = [sum(e.accepted_tokens // (p + 2) for e in truth.engines) for p in range(NUM_SPECULATIVE_TOKENS)]
    assert list(counts) == expected


@pytest.mark.parametrize("series", [
    [({"position": "0"}, 5.0), ({"position": "2"}, 1.0)],  # position 1 missing
    [({"position": "0"}, math.nan)],
    [({"position": "0"}, -1.0)],
    [({"position": "x"}, 1.0)],
    [({"position": "٣"}, 1.0)],  # not ASCII digits
    [({"position": "99"}, 1.0)],  # past any drafter
    [({}, 1.0)],
])
def test_a_page_that_is_not_whole_is_unknown(series: list[tuple[dict[str, str], float]]) -> None:
    assert accepted_by_position(series) is None


def test_window_acceptance_per_position_is_the_counters_delta_over_the_drafts_delta() -> None:
    first = engine_sample_from_text(page(100, [[80, 50, 20], [60, 30, 10]]), "vllm")
    # 100 more drafts per engine; engine 1 now fails at its first token
    last = engine_sample_from_text(page(200, [[160, 100, 40], [70, 31, 10]]), "vllm")
    window = [NodeSample(node="n", source="scrape", taken_at=t, engine=e) for t, e in ((0.0, first), (10.0, last))]
    view = engine_view(window, 10.0)
    assert view is not None
    assert view.acceptance_by_position == pytest.approx([(80 + 10) / 200, (50 + 1) / 200, 20 / 200])
    assert view.draft_tokens_per_s == pytest.approx(60.0)
    ranks = rank_views(window, 10.0, 8, None)
    assert ranks is not None
    assert ranks[0].acceptance_by_position == pytest.approx([0.8, 0.5, 0.2])
    assert ranks[1].acceptance_by_position == pytest.approx([0.1, 0.01, 0.0])


def test_no_per_position_counters_is_no_chart() -> None:
    text = page(100, [[80, 50, 20]]).replace("_per_pos_total", "_per_pos_elsewhere")
    sample = engine_sample_from_text(text, "vllm")
    assert sample.accepted_tokens_by_position_total is None


def test_promql_asks_per_node_and_per_engine_by_position_and_reads_the_answer_back() -> None:
    queries = {q.key: q.promql for q in QueryBuilder().engine()}
    assert "by (infertop_node, position)" in queries["accepted_tokens_by_position_total"]
    assert "by (infertop_node, engine, dp_rank, position)" in queries["rank:accepted_tokens_by_position_total"]
    assert subkeys("engine", "rank:accepted_tokens_by_position_total") == ("engine", "dp_rank", "position")
    fig = {
        "drafts_total": {(): 200.0},
        "accepted_tokens_by_position_total": {("1",): 130.0, ("0",): 150.0},
        "rank:accepted_tokens_by_position_total": {
            ("0", "", "0"): 80.0, ("0", "", "1"): 70.0, ("1", "", "0"): 70.0, ("1", "", "1"): 60.0},
    }
    sample = engine_sample("n", 0.0, fig, "prom")
    assert sample is not None and sample.engine is not None
    assert sample.engine.accepted_tokens_by_position_total == (150.0, 130.0)
    assert [r.engine.accepted_tokens_by_position_total for r in sample.engine.ranks or []] == [
        (80.0, 70.0), (70.0, 60.0)]
    assert by_position({("0",): None}) is None
