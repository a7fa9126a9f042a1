"""DeepSeek's own architecture with MTP on a real vLLM: the closest to DeepInfer that runs
here (issue 33). A tiny DeepseekV3ForCausalLM (MLA + MoE + one MTP layer) drafts one
token on every decode step, so the full-acceptance figure can be checked against its
identity: tokens produced + draft tokens rejected = drafts + draft tokens + the requests'
first tokens (made by the prefill, without a draft) — the old formula plus those."""

from __future__ import annotations

import pytest

from tests.support.vllm_fixture import XDIST_GROUP, real_vllm_mtp  # noqa: F401 (the fixture)
from tests.support.vllm_server import RealVllmServer
from tests.support.vllm_truth import Run, drive, reading_span_s, truth_from_pages, window_pages

# one worker starts the session's engines, once (tests/support/vllm_fixture.py)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800), pytest.mark.xdist_group(XDIST_GROUP)]

INTERVAL_S, WINDOW_S = 2.0, 10.0


@pytest.fixture(scope="module")
def run(real_vllm_mtp: RealVllmServer, tmp_path_factory: pytest.TempPathFactory) -> Run:  # noqa: F811
    return drive(real_vllm_mtp, tmp_path_factory.mktemp("real-vllm-mtp"), INTERVAL_S, WINDOW_S)


def test_every_decode_step_drafts_so_full_acceptance_has_its_identity(run: Run) -> None:
    assert not run.counts.errors, run.counts.errors[:3]

    def delta(name: str) -> float:
        return run.after[name] - run.before[name]

    requests = delta("finished")
    assert requests == run.counts.requests > 0
    generated, drafts = delta("vllm:generation_tokens_total"), delta("vllm:spec_decode_num_drafts_total")
    drafted, accepted = delta("vllm:spec_decode_num_draft_tokens_total"), delta("vllm:spec_decode_num_accepted_tokens_total")
    assert generated == run.counts.completion_tokens
    assert drafted == drafts  # one MTP layer: one draft token a step
    first_tokens = delta("vllm:time_to_first_token_seconds_count")  # one per request
    assert first_tokens == requests
    # every decode step drafted: each produced 1 + its accepted tokens. A request's last
    # step may be cut short by max_tokens (its accepted token dropped): at most one a request
    cut = drafts + accepted + first_tokens - generated
    assert 0 <= cut <= requests, (generated, drafts, accepted, first_tokens)
    full = generated + drafted - accepted
    assert full == drafts + drafted + first_tokens - cut


def test_full_acceptance_on_mtp_is_the_truth_of_the_pages_it_read(run: Run) -> None:
    engine = next(n for n in run.snapshot["nodes"] if n["name"] == "scraped")["engine"]
    # the pages the monitor's window figures came from, as its engine view names them
    truth = truth_from_pages(*window_pages(run.pages, engine), reading_span_s(engine))
    for name in ("accepted_tokens_per_s", "full_acceptance_tokens_per_s", "draft_acceptance",
                 "mean_acceptance_length", "decode_steps_per_s"):
        want = truth.figures[name]
        assert want and truth.agrees(name, engine[name], 0.03), (name, engine[name], want, truth.rate_range)
    assert engine["full_acceptance_tokens_per_s"] >= engine["accepted_tokens_per_s"] > 0
    # the near-identity MTP layer drafts what the model then often confirms
    assert 0 < engine["draft_acceptance"] <= 1
