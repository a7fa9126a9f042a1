"""Per-rank engines from engine logs (issue 35): a log whose lines carry several engine
ids — vLLM 0.33's ``Engine 003:`` prefix (`LoggingStatLogger.log`, one logger per DP
engine, each printing its stats line then its ``SpecDecoding metrics`` line), SGLang
0.5.23's ``DP3`` — gives one rank per engine id, each with its own figures within 2 % of
the truth the lines were written from. Lines are written with the upstream format strings
(tests/collectors/test_engine_logs_truth.py) to a real file and followed by `LogWatch`."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from infertop.collectors.probe.bundle import probe_script
from infertop.collectors.probe.logs import LogWatch
from infertop.collectors.probe.schema import sample_from_reading
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.monitor.evaluation.engine_ranks import rank_views
from infertop.monitor.evaluation.figures import engine_view
from tests.collectors.test_engine_logs_truth import T0, sglang_decode_line, vllm_iteration_line
from tests.support.probe_run import PYTHON

ENGINES = 4
K = 3  # MTP draft tokens a step
GEN_TPS = [500.0, 520.0, 300.0, 510.0]  # engine 2 is slow
STEPS_PER_S = [30, 30, 18, 30]
ACCEPT = [0.70, 0.72, 0.50, 0.69]
RUNNING = [40, 41, 25, 42]
KV_PCT = [61.0, 62.5, 48.0, 60.0]
INTERVAL_S = 10  # vLLM's --log-stats-interval default


def vllm_lines(at_s: int, engine: int, gen_tps: float, drafts: int, accepted: int) -> str:
    """One engine's logger at one interval: its stats line, then its speculative line
    (vLLM 0.33 loggers.py / spec_decode/metrics.py %-formats, as logged)."""
    parts = ["Avg prompt throughput: %.1f tokens/s", "Avg generation throughput: %.1f tokens/s",
             "Running: %d reqs", "Waiting: %d reqs", "%s KV cache usage: %.1f%%", "Prefix cache hit rate: %.1f%%"]
    stats = ("Engine %03d: " % engine) + ", ".join(parts) % (  # noqa: UP031
        0.0, gen_tps, RUNNING[engine], engine, "GPU", KV_PCT[engine], 50.0)
    drafted = drafts * K
    rates = ", ".join(f"{ACCEPT[engine] ** (p + 1):.3f}" for p in range(K))
    spec = ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "  # noqa: UP031
            "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
            "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%") % (
        1 + accepted / drafts, accepted / INTERVAL_S, drafted / INTERVAL_S, accepted, drafted, rates,
        100.0 * accepted / drafted)
    stamp = f"11-30 10:{at_s // 60:02d}:{at_s % 60:02d}"
    return (f"(APIServer pid=7) INFO {stamp} [loggers.py:336] {stats}\n"
            f"(APIServer pid=7) INFO {stamp} [metrics.py:120] {spec}\n")


def test_vllm_engine_ids_give_one_rank_each_within_2_percent(tmp_path: Path) -> None:
    rng = random.Random(3)
    log = tmp_path / "vllm.log"
    truth = [{"tokens": 0.0, "drafts": 0, "accepted": 0, "steps": 0} for _ in range(ENGINES)]

    def interval(at_s: int, record: bool) -> str:
        out = []
        for e in range(ENGINES):
            gen_tps = GEN_TPS[e] * rng.uniform(0.95, 1.05)
            drafts = STEPS_PER_S[e] * INTERVAL_S
            accepted = round(drafts * K * ACCEPT[e])
            # the engine's steps in the interval, one Iteration line each
            for i in range(drafts):
                out.append(vllm_iteration_line((at_s + i * INTERVAL_S // drafts) % 60, e, i, False, KV_PCT[e]))
            out.append(vllm_lines(at_s, e, round(gen_tps, 1), drafts, accepted))
            if record:
                t = truth[e]
                t["tokens"] += round(gen_tps, 1) * INTERVAL_S
                t["drafts"] += drafts
                t["accepted"] += accepted
                t["steps"] += drafts
        return "".join(out)

    log.write_text(interval(0, False) + interval(10, False))
    watch = LogWatch({"path": str(log), "pattern_sets": ["vllm"], "from_start": True})
    first, _ = watch.read(now=T0)
    rounds = 3
    with log.open("a") as f:
        f.write("".join(interval(20 + INTERVAL_S * n, True) for n in range(rounds)))
    span = rounds * INTERVAL_S
    second, _ = watch.read(now=T0 + span)
    watch.close()
    samples = [NodeSample(node="decode-05", source="log", taken_at=t, engine=EngineSample(**e))
               for t, e in ((T0, first), (T0 + span, second))]
    ranks = rank_views(samples, now=T0 + span, node_gpus=8, tp=2)
    assert ranks is not None and [r.key for r in ranks] == [f"engine={e}" for e in range(ENGINES)]
    for e, (rank, t) in enumerate(zip(ranks, truth, strict=True)):
        assert rank.dp_rank == e and rank.gpus == [2 * e, 2 * e + 1] and rank.gpus_from == "layout"
        assert rank.accepted_tokens_per_s == pytest.approx(t["tokens"] / span, rel=0.02)
        assert rank.draft_acceptance == pytest.approx(t["accepted"] / (t["drafts"] * K), rel=0.02)
        assert rank.mean_acceptance_length == pytest.approx(1 + t["accepted"] / t["drafts"], rel=0.02)
        assert rank.decode_steps_per_s == pytest.approx(t["steps"] / span, rel=0.02)
        assert rank.requests_running == RUNNING[e] and rank.requests_waiting == e
        assert rank.kv_cache_usage == pytest.approx(KV_PCT[e] / 100, rel=0.02)
    slow = min(ranks, key=lambda r: r.accepted_tokens_per_s or 0.0)
    assert slow.label == "engine 2 (GPUs 4–5)"
    # the node's own figures stay the roll-up of its engines
    node = engine_view(samples, now=T0 + span)
    assert node is not None
    assert node.accepted_tokens_per_s == pytest.approx(sum(t["tokens"] for t in truth) / span, rel=0.02)
    assert node.requests_running == sum(RUNNING)


def test_one_engine_id_gives_no_ranks(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(vllm_lines(0, 0, 500.0, 300, 600) + vllm_lines(10, 0, 500.0, 300, 600))
    watch = LogWatch({"path": str(log), "pattern_sets": ["vllm"], "from_start": True})
    engine, _ = watch.read(now=T0)
    watch.close()
    assert "ranks" not in engine and EngineSample(**engine).ranks is None


SG_GAP_S = [0.5, 0.5, 0.8, 0.5]  # DP2 prints less often: its 40 passes take longer
SG_GEN_TPS = [5000.0, 5100.0, 3000.0, 4900.0]
SG_ACCEPT_LEN = [3.2, 3.1, 2.4, 3.0]


def sglang_lines(start: float, end: float, record: list[dict[str, float]] | None) -> str:
    out = []
    for dp in range(ENGINES):
        at = start + SG_GAP_S[dp]
        while at <= end + 1e-9:
            length = SG_ACCEPT_LEN[dp]
            rate = round((length - 1) / 3, 2)
            out.append((at, sglang_decode_line(at, dp, 40 + dp, 9000, 0.5, length, rate, SG_GEN_TPS[dp], dp)))
            if record is not None:
                tokens = SG_GEN_TPS[dp] * SG_GAP_S[dp]
                drafts = tokens / length
                t = record[dp]
                t["tokens"] += tokens
                t["drafts"] += drafts
                t["accepted"] += drafts * (length - 1)
                t["proposed"] += drafts * (length - 1) / rate
                t["steps"] += 40
            at += SG_GAP_S[dp]
    return "".join(line for _, line in sorted(out))


def test_sglang_dp_ranks_within_2_percent(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(sglang_lines(0.0, 4.0, None))
    watch = LogWatch({"path": str(log), "pattern_sets": ["sglang"], "from_start": True})
    first, _ = watch.read(now=T0)
    truth = [{"tokens": 0.0, "drafts": 0.0, "accepted": 0.0, "proposed": 0.0, "steps": 0.0} for _ in range(ENGINES)]
    span = 8.0
    with log.open("a") as f:
        f.write(sglang_lines(4.0, 4.0 + span, truth))
    second, _ = watch.read(now=T0 + span)
    watch.close()
    samples = [NodeSample(node="decode-05", source="log", taken_at=t, engine=EngineSample(**e))
               for t, e in ((T0, first), (T0 + span, second))]
    ranks = rank_views(samples, now=T0 + span, node_gpus=8, tp=2)
    assert ranks is not None and [r.key for r in ranks] == [f"dp_rank={d}" for d in range(ENGINES)]
    for dp, (rank, t) in enumerate(zip(ranks, truth, strict=True)):
        # tokens over the rank's own log clock: its throughput as printed
        assert rank.accepted_tokens_per_s == pytest.approx(SG_GEN_TPS[dp], rel=0.02)
        assert rank.draft_acceptance == pytest.approx(t["accepted"] / t["proposed"], rel=0.02)
        assert rank.mean_acceptance_length == pytest.approx(1 + t["accepted"] / t["drafts"], rel=0.02)
        assert rank.decode_steps_per_s == pytest.approx(t["steps"] / span, rel=0.02)
        assert rank.requests_running == 40 + dp and rank.requests_waiting == dp
    assert min(ranks, key=lambda r: r.decode_steps_per_s or 0.0).dp_rank == 2


def test_the_bundled_probe_ships_the_ranks(tmp_path: Path) -> None:
    # the probe sent to nodes is one stdlib file: the ranks travel in its reading
    log = tmp_path / "sglang.log"
    log.write_text(sglang_lines(0.0, 2.0, None))
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    (tmp_path / "empty").mkdir()
    config = {"interval_s": 0.05, "count": 1, "engine_log": {"path": str(log), "pattern_sets": ["sglang"]}}
    out = subprocess.run([PYTHON, "-I", str(script), json.dumps(config)], cwd=tmp_path / "empty",
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    reading = json.loads(out.stdout.splitlines()[0])
    sample = sample_from_reading("n1", "ssh", reading, reading["t"])
    assert sample.engine is not None and sample.engine.ranks is not None
    assert [(r.key, r.dp_rank) for r in sample.engine.ranks] == [(f"dp_rank={d}", d) for d in range(ENGINES)]
    assert [r.engine.requests_running for r in sample.engine.ranks] == [40 + d for d in range(ENGINES)]


def test_a_reading_holds_at_most_64_ranks() -> None:
    # a probe's reading is anyone's JSON: its ranks are bounded as a page's are
    ranks = [{"key": f"engine={i}", "dp_rank": i, "engine": {"source": "log"}} for i in range(100)]
    sample = sample_from_reading("n1", "ssh", {"engine": {"source": "log", "ranks": ranks}}, T0)
    assert sample.engine is not None and sample.engine.ranks is not None
    assert [r.dp_rank for r in sample.engine.ranks] == list(range(64))
