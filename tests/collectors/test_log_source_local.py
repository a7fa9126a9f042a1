"""A local node's engine log, end to end: a writer process, the real binary, the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.log_source import LogSource, local_log_sources, log_watch_config
from infertop.collectors.sources.registry import build_sources
from infertop.layouts.loader import parse_layout
from infertop.monitor.evaluation.figures import engine_view
from tests.support.log_writer import LOG_WRITER as WRITER
from tests.support.paths import infertop_bin

LINES = (
    "(APIServer pid=7) INFO 08-04 20:51:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 400.0 tokens/s, Running: 8 reqs, Waiting: 2 reqs, GPU KV cache usage: 25.0%, "
    "Prefix cache hit rate: 0.0%\n"
    "(APIServer pid=7) INFO 08-04 20:51:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.40, "
    "Accepted throughput: 240.00 tokens/s, Drafted throughput: 700.00 tokens/s, Accepted: 120 tokens, "
    "Drafted: 350 tokens, Per-position acceptance rate: 0.800, 0.640, 0.420, 0.260, 0.160, 0.080, 0.040, "
    "Avg Draft acceptance rate: 34.3%\n"
)


def layout_for(log: Path, interval: float = 0.5) -> str:
    return textwrap.dedent(
        f"""
        [cluster]
        interval_s = {interval}
        window_s = 3

        [[nodes]]
        name = "offline-01"
        local = true
        engine = {{ log = "{log}", log_interval_s = {interval} }}
        """
    )


def test_registry_adds_a_log_source_for_a_local_node(tmp_path: Path) -> None:
    layout = parse_layout(layout_for(tmp_path / "e.log"))
    kinds = sorted(s.kind for s in build_sources(layout))
    assert kinds == ["local", "log"]
    config = log_watch_config(layout.nodes[0].engine, layout)  # type: ignore[arg-type]
    assert config is not None
    assert json.loads(json.dumps(config)) == config  # what the SSH probe receives: plain JSON


def test_no_log_no_source() -> None:
    layout = parse_layout('[[nodes]]\nname = "a"\nlocal = true\n')
    assert local_log_sources(layout) == []


async def test_log_source_samples_give_the_lines_figures(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("")
    layout = parse_layout(layout_for(log))
    (source,) = local_log_sources(layout)
    samples: list[NodeSample] = []
    for i in range(4):
        with log.open("a") as f:
            f.write(LINES.format(s=i))
        (sample,) = await source.poll()
        samples.append(sample.model_copy(update={"taken_at": 100.0 + 0.5 * i}))
    await source.close()
    assert isinstance(source, LogSource)
    view = engine_view(samples, now=101.5)
    assert view is not None
    assert view.source == "log"
    assert view.draft_acceptance == pytest.approx(120 / 350)
    assert view.mean_acceptance_length == pytest.approx(1 + 120 / 50)
    assert view.accepted_tokens_per_s == pytest.approx(400.0)
    assert view.requests_running == 8
    assert view.kv_cache_usage == pytest.approx(0.25)


def test_snapshot_json_reports_what_the_log_implies(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("INFO 08-04 20:50:00 [api_server.py:1] starting\n")
    layout = tmp_path / "layout.toml"
    layout.write_text(layout_for(log))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), LINES, "8"])
    try:
        out = subprocess.run(
            [infertop_bin(), "snapshot", "--layout", str(layout), "--json", "--window", "3"],
            capture_output=True, text=True, timeout=60, check=False,
        )
    finally:
        writer.kill()
        writer.wait()
    assert out.returncode == 0, out.stderr
    (node,) = json.loads(out.stdout)["nodes"]
    engine = node["engine"]
    assert engine["source"] == "log"
    assert engine["draft_acceptance"] == pytest.approx(120 / 350, rel=1e-6)
    assert engine["mean_acceptance_length"] == pytest.approx(3.4, rel=1e-6)
    # 400 tokens/s written every 0.5 s: counts arrive in steps, so the rate over a 3 s
    # window is within a step of the true figure
    assert engine["accepted_tokens_per_s"] == pytest.approx(400.0, rel=0.35)
    assert engine["requests_running"] == 8
    assert engine["age_s"] is not None and engine["age_s"] < 2.0
