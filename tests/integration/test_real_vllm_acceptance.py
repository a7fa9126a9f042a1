"""An acceptance drop on a real vLLM (issue 43): two tiny DeepSeek-V3 engines with MTP
drafting, served as two nodes of one decode pool — one whose MTP head agrees with its
target (its draft is the model's own next guess), one whose head is shifted by a token
(its draft is rarely confirmed). infertop flags the disagreeing node with
`acceptance-drop`, names the $/h lost, draws its per-position chart from the real page,
and leaves the agreeing node alone; every figure is checked against the pages it read."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import infertop_bin
from tests.support.vllm_fixture import XDIST_GROUP, real_vllm_mtp, real_vllm_mtp_disagreeing  # noqa: F401 (fixtures)
from tests.support.vllm_load import Load, MetricsRelay, Page
from tests.support.vllm_server import RealVllmServer
from tests.support.vllm_truth import reading_span_s, truth_from_pages, window_pages
from tests.support.waiting import until

# one worker starts the session's engines, once (tests/support/vllm_fixture.py)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400), pytest.mark.xdist_group(XDIST_GROUP)]

INTERVAL_S, WINDOW_S = 2.0, 12.0
NODE_USD_PER_H = 10.0


def per_position(text: str) -> dict[int, float]:
    """The page's accepted tokens per draft position, summed over engines (prometheus_client's parser)."""
    out: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                position = int(s.labels["position"])
                out[position] = out.get(position, 0.0) + s.value
    return out


def drafts(text: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "vllm:spec_decode_num_drafts_total")


def node(snapshot: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in snapshot["nodes"] if n["name"] == name)


@pytest.fixture(scope="module")
def run(real_vllm_mtp: RealVllmServer, real_vllm_mtp_disagreeing: RealVllmServer,  # noqa: F811
        tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, list[Page]]]:
    work = tmp_path_factory.mktemp("real-vllm-acceptance")
    servers = {"agreeing": real_vllm_mtp, "disagreeing": real_vllm_mtp_disagreeing}
    with MetricsRelay(real_vllm_mtp.base_url) as good, MetricsRelay(real_vllm_mtp_disagreeing.base_url) as off:
        relays = {"agreeing": good, "disagreeing": off}
        layout = work / "pool.toml"
        layout.write_text(
            f'[cluster]\nname = "real-vllm-pool"\ninterval_s = {INTERVAL_S}\n\n'
            f'[pricing]\nnode_hour_usd = {NODE_USD_PER_H}\n\n'
            # a snapshot is one window long: the hold must fit in it
            '[thresholds]\nhold_s = 4\nacceptance_min_draft_tokens_per_s = 0.1\n\n'
            + "".join(f'[[nodes]]\nname = "{name}"\nrole = "decode"\nengine = {{ url = {json.dumps(r.url)} }}\n\n'
                      for name, r in relays.items())
        )
        loads = {name: Load(s.base_url, s.name, workers=4).start() for name, s in servers.items()}
        try:
            for name, load in loads.items():
                assert load.first_done.wait(900), f"no answer from {name}: {load.counts.errors[:3]}"
            until(lambda: all(ld.counts.requests >= 4 for ld in loads.values()), 900, "a warm load on both")
            out = subprocess.run(
                [infertop_bin(), "snapshot", "--layout", str(layout), "--window", str(WINDOW_S), "--json"],
                capture_output=True, text=True, timeout=900, check=False,
            )
            assert all(ld.running() for ld in loads.values()), "a load ended inside the window"
        finally:
            for load in loads.values():
                load.finish()
        pages = {name: list(r.pages) for name, r in relays.items()}
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout), pages


def test_the_disagreeing_node_alone_is_flagged_and_priced(run: tuple[dict[str, Any], dict[str, list[Page]]]) -> None:
    snapshot, pages = run
    good, off = node(snapshot, "agreeing"), node(snapshot, "disagreeing")
    assert [v["kind"] for v in good["verdicts"] if v["kind"] == "acceptance-drop"] == []
    [verdict] = [v for v in off["verdicts"] if v["kind"] == "acceptance-drop"]
    assert not verdict["pending"], verdict
    # the figures it names are the pages' own over the window it read
    for view in (good, off):
        engine = view["engine"]
        truth = truth_from_pages(*window_pages(pages[view["name"]], engine), reading_span_s(engine))
        assert truth.agrees("draft_acceptance", engine["draft_acceptance"], 0.03), (view["name"], engine, truth)
        assert truth.agrees("accepted_tokens_per_s", engine["accepted_tokens_per_s"], 0.03)
    a_off, a_good = off["engine"]["draft_acceptance"], good["engine"]["draft_acceptance"]
    assert a_off < 0.8 * a_good
    assert verdict["detail"].startswith(f"draft acceptance {a_off * 100:.0f} % vs pool median {a_good * 100:.0f} % "
                                        "(1 other node, drafting method not served, 1 draft token)")
    # the money: at the pool's acceptance its draft tokens would have made this many more tokens
    drafted = off["engine"]["draft_tokens_per_s"]
    tokens = off["engine"]["accepted_tokens_per_s"]
    at_pool = tokens + drafted * (a_good - a_off)
    stake = NODE_USD_PER_H * (at_pool - tokens) / at_pool
    assert verdict["usd_per_hour_at_stake"] == pytest.approx(stake, abs=0.01)
    assert f"${stake:,.2f}/h of its ${NODE_USD_PER_H:,.2f}/h lost" in verdict["detail"]
    assert verdict["trend"]["figure"] == "draft acceptance"


def test_the_per_position_chart_is_the_real_pages(run: tuple[dict[str, Any], dict[str, list[Page]]]) -> None:
    snapshot, pages = run
    for name in ("agreeing", "disagreeing"):
        engine = node(snapshot, name)["engine"]
        first, last = window_pages(pages[name], engine)
        before, after = per_position(first.text), per_position(last.text)
        assert sorted(after) == [0]  # one MTP layer: one draft position
        want = (after[0] - before[0]) / (drafts(last.text) - drafts(first.text))
        assert engine["acceptance_by_position"] == pytest.approx([want], abs=1e-9)
    from infertop.monitor.snapshot import EngineView
    from infertop.tui.node_rows import engine_text

    shown = engine_text(EngineView(**{k: v for k, v in node(snapshot, "disagreeing")["engine"].items()
                                      if k in ("draft_acceptance", "acceptance_by_position")}), []).plain
    assert "accepted by draft position  1 " in shown
