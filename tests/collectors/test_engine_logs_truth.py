"""Engine log lines written with the upstream format strings, followed from a real file by
`LogWatch`, and the figures derived from them against the truth the lines were made from.

Formats: SGLang 0.5.23 `scheduler_components/metrics_reporter.py` (`report_decode_stats`:
``Decode batch, #running-req: …``, prefix ``[%(asctime)s DP<n> TP<n> EP<n>]`` from
`configure_logger`); vLLM 0.33.0 `v1/metrics/loggers.py` (`LoggingStatLogger.log`: parts
joined by ", ", ``"%s KV cache usage: %.1f%%"`` with the device in capitals;
`_log_iteration_details`: ``Iteration(%d): …``).
"""

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
from infertop.collectors.sources.log_source import log_watch_config
from infertop.layouts.loader import parse_layout
from infertop.monitor.evaluation.figures import engine_view
from tests.support.probe_run import PYTHON

T0 = 1_790_000_000.0


def sglang_decode_line(at: float, dp: int, running: int, tokens: int, usage: float,
                       accept_len: float, accept_rate: float, gen_tps: float, queue: int) -> str:
    """What `report_decode_stats` logs for a non-hybrid model with speculative decoding."""
    whole = int(at)
    stamp = f"2026-11-30 10:{(whole // 60) % 60:02d}:{whole % 60:02d}.{round((at - whole) * 1000):03d}"
    msg = f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
    msg += f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
    msg += f"cuda graph: True, gen throughput (token/s): {gen_tps:.2f}, #queue-req: {queue}"
    return f"[{stamp} DP{dp} TP{dp} EP{dp}] {msg}\n"


def vllm_stats_line(at_s: int, engine: int, device: str, kv_pct: float, gen_tps: float) -> str:
    parts = ["Avg prompt throughput: %.1f tokens/s", "Avg generation throughput: %.1f tokens/s",
             "Running: %d reqs", "Waiting: %d reqs", "%s KV cache usage: %.1f%%",
             "Prefix cache hit rate: %.1f%%"]
    # vLLM's own %-format strings, as logged
    body = ("Engine %03d: " % engine) + ", ".join(parts) % (  # noqa: UP031
        0.0, gen_tps, 12, 3, device, kv_pct, 50.0)
    return f"(APIServer pid=7) INFO 11-30 10:00:{at_s:02d} [loggers.py:336] {body}\n"


# vLLM's own %-format string (loggers.py `_log_iteration_details`), as logged
ITERATION_FORMAT = (
    "%sIteration(%d): %d context requests, %d context tokens, "
    "%d generation requests, %d generation tokens, "
    "iteration elapsed time: %.2f ms%s, "
    "%s KV cache usage: %.1f%%%s"
)


def vllm_iteration_line(at_s: int, engine: int, index: int, dummy: bool, kv_pct: float) -> str:
    reqs = 0 if dummy else 40
    args = ("Engine %03d: " % engine, index, 0, 0, reqs, reqs, 21.5,  # noqa: UP031
            " (dummy)" if dummy else "", "GPU", kv_pct, "")
    body = ITERATION_FORMAT % args
    return f"(EngineCore_DP{engine} pid=9) INFO 11-30 10:00:{at_s:02d} [loggers.py:199] {body}\n"


def _view(log: Path, pattern_set: str, write_window) -> tuple[EngineSample, object]:  # type: ignore[no-untyped-def]
    watch = LogWatch({"path": str(log), "pattern_sets": [pattern_set], "from_start": True})
    first, _ = watch.read(now=T0)
    write_window()
    second, _ = watch.read(now=T0 + 10.0)
    watch.close()
    samples = [NodeSample(node="n", source="log", taken_at=t, engine=EngineSample(**e))
               for t, e in ((T0, first), (T0 + 10.0, second))]
    view = engine_view(samples, now=T0 + 10.0)
    return samples[-1].engine, view  # type: ignore[return-value]


def test_sglang_decode_lines_give_every_engine_figure(tmp_path: Path) -> None:
    rng = random.Random(5)
    log = tmp_path / "sglang.log"
    engines, gap, interval = 4, 0.5, 40  # 40 passes every 0.5 s: 80 decode steps/s
    truth = {"tokens": 0.0, "drafts": 0.0, "accepted": 0.0, "proposed": 0.0}
    last: dict[int, tuple[int, int, float]] = {}

    def lines(start: float, count: int, record: bool, idle: tuple[int, ...] = ()) -> str:
        out = []
        for n in range(count):
            for dp in range(engines):
                if dp in idle:
                    continue
                at = start + n * gap + dp * 0.01
                accept_len = round(rng.uniform(2.5, 3.5), 2)
                accept_rate = round((accept_len - 1) / 3, 2)
                gen_tps = round(rng.uniform(4000, 6000), 2)
                running, queue, usage = rng.randint(40, 60), rng.randint(0, 5), round(rng.uniform(0.3, 0.6), 2)
                out.append(sglang_decode_line(at, dp, running, 9000, usage, accept_len, accept_rate, gen_tps, queue))
                last[dp] = (running, queue, usage)
                if record:
                    tokens = gen_tps * gap
                    drafts = tokens / accept_len
                    truth["tokens"] += tokens
                    truth["drafts"] += drafts
                    truth["accepted"] += drafts * (accept_len - 1)
                    truth["proposed"] += drafts * (accept_len - 1) / accept_rate
        return "".join(out)

    log.write_text(lines(0.0, 5, False))
    # the window: 10 s of log time after the lines already read
    def window() -> None:
        with log.open("a") as f:
            # rank 3 idles: it prints no decode lines, the others go on in lockstep
            f.write(lines(5 * gap, round(10 / gap), True, idle=(3,)))

    _, view = _view(log, "sglang", window)
    assert view is not None
    assert view.decode_steps_per_s == pytest.approx(interval / gap, rel=0.02)
    assert view.accepted_tokens_per_s == pytest.approx(truth["tokens"] / 10.0, rel=0.02)
    assert view.draft_acceptance == pytest.approx(truth["accepted"] / truth["proposed"], rel=0.02)
    assert view.mean_acceptance_length == pytest.approx(1 + truth["accepted"] / truth["drafts"], rel=0.02)
    # an idle rank keeps the gauges of its last line
    assert view.requests_running == sum(r for r, _, _ in last.values())
    assert view.requests_waiting == sum(q for _, q, _ in last.values())
    assert view.kv_cache_usage == pytest.approx(sum(u for _, _, u in last.values()) / engines, rel=0.02)


@pytest.mark.parametrize("device", ["GPU", "NPU", "XPU", "CPU"])
def test_vllm_kv_cache_usage_of_any_device(tmp_path: Path, device: str) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(vllm_stats_line(0, 0, device, 37.5, 100.0) + vllm_stats_line(10, 0, device, 42.5, 100.0))
    watch = LogWatch({"path": str(log), "pattern_sets": ["vllm"], "from_start": True})
    engine, _ = watch.read(now=T0)
    watch.close()
    assert engine["kv_cache_usage"] == pytest.approx(0.425)  # vLLM-Ascend prints "NPU KV cache usage"


def test_vllm_iteration_lines_give_decode_steps(tmp_path: Path) -> None:
    # two DP engines in lockstep, 25 steps/s each; an idle one prints its dummy steps
    log = tmp_path / "vllm.log"
    log.write_text("".join(vllm_iteration_line(0, e, i, e == 1, 30.0) for i in range(5) for e in (0, 1)))

    def window() -> None:
        with log.open("a") as f:
            for i in range(5, 5 + 250):
                for e in (0, 1):
                    f.write(vllm_iteration_line(i // 25, e, i, e == 1, 40.0))

    _, view = _view(log, "vllm", window)
    assert view is not None
    assert view.decode_steps_per_s == pytest.approx(25.0, rel=0.02)
    assert view.kv_cache_usage == pytest.approx(0.40)


def test_bundled_probe_reads_sglang_lines(tmp_path: Path) -> None:
    # the probe sent to nodes is one stdlib file: the SGLang set must be in it
    log = tmp_path / "sglang.log"
    log.write_text("".join(sglang_decode_line(0.5 * n, dp, 40 + dp, 9000, 0.5, 3.0, 0.67, 5000.0, dp)
                           for n in range(4) for dp in range(2)))
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    (tmp_path / "empty").mkdir()
    config = {"interval_s": 0.05, "count": 1, "engine_log": {"path": str(log), "pattern_sets": ["sglang"]}}
    out = subprocess.run([PYTHON, "-I", str(script), json.dumps(config)], cwd=tmp_path / "empty",
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    reading = json.loads(out.stdout.splitlines()[0])
    sample = sample_from_reading("n1", "ssh", reading, reading["t"])
    assert sample.engine is not None
    assert sample.engine.requests_running == 40 + 41
    assert sample.engine.requests_waiting == 0 + 1
    assert sample.engine.kv_cache_usage == pytest.approx(0.5)
    assert sample.engine.steps_total is not None and sample.engine.steps_total > 0


def test_sglang_decode_log_interval_from_the_layout(tmp_path: Path) -> None:
    # --decode-log-interval 20: each line is 20 passes; lines every 0.5 s → 40 steps/s
    layout = parse_layout(
        f'[[nodes]]\nname = "a"\nlocal = true\n'
        f'engine = {{ log = "{tmp_path / "s.log"}", log_patterns = ["sglang"], log_decode_passes = 20 }}\n'
    )
    engine = layout.nodes[0].engine
    assert engine is not None
    config = log_watch_config(engine, layout)
    assert config is not None and config["decode_passes"] == 20
    log = tmp_path / "s.log"
    log.write_text(sglang_decode_line(0.0, 0, 10, 100, 0.1, 2.0, 0.33, 100.0, 0))
    watch = LogWatch({**config, "from_start": True})
    first, _ = watch.read(now=T0)
    with log.open("a") as f:
        f.write("".join(sglang_decode_line(0.5 * (n + 1), 0, 10, 100, 0.1, 2.0, 0.33, 100.0, 0)
                        for n in range(20)))
    second, _ = watch.read(now=T0 + 10.0)
    watch.close()
    assert (second["steps_total"] - first["steps_total"]) / 10.0 == pytest.approx(40.0, rel=0.02)
