"""The bundled probe follows an engine log and reads Ascend NPUs, as it will on a node."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from infertop.collectors.probe.bundle import probe_script
from infertop.collectors.probe.schema import sample_from_reading
from infertop.collectors.sources.ssh import ssh_source_for
from infertop.layouts.loader import parse_layout

FIXTURES = Path(__file__).parent.parent / "fixtures"
STATS = (
    "INFO 08-04 20:51:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 9.0%\n"
)


def _tool(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_probe(tmp_path: Path, config: dict, path_dirs: list[Path]) -> list[dict]:
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    env = {"PATH": os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"]), "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, str(script), json.dumps(config)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_bundled_probe_streams_log_figures_and_ascend_npus(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(STATS.format(s=0) + STATS.format(s=10))
    tools = tmp_path / "bin"
    tools.mkdir()
    _tool(tools / "npu-smi", f"cat {FIXTURES / 'npu' / 'npu_smi_910b.txt'}\n")
    _tool(tools / "hccn_tool", 'if [ "$2" = 2 ]; then echo "link status: DOWN"; else echo "link status: UP"; fi\n')
    config = {"interval_s": 0.2, "count": 2, "engine_log": {"path": str(log), "pattern_sets": ["vllm"]}}
    readings = run_probe(tmp_path, config, [tools])
    assert len(readings) == 2
    sample = sample_from_reading("n1", "ssh", readings[-1], readings[-1]["t"])
    assert sample.error is None
    engine = sample.engine
    assert engine is not None and engine.source == "log"
    assert engine.requests_running == 3 and engine.kv_cache_usage == pytest.approx(0.09)
    assert engine.log_last_line_at is not None
    assert "generation_tokens_total" in readings[-1]["engine"]  # counters, never raw lines
    assert "Engine 000" not in json.dumps(readings)
    assert sample.gpus is not None and [g.kind for g in sample.gpus] == ["npu"] * 4
    roce = [n for n in sample.nics or [] if n.kind == "npu-roce"]
    assert [(n.name, n.state) for n in roce] == [
        ("npu0-roce", "up"), ("npu1-roce", "up"), ("npu2-roce", "down"), ("npu3-roce", "up"),
    ]
    assert not any("pynvml" in n for n in sample.notes)  # an Ascend node is not "missing GPUs"


def test_bad_pattern_is_a_note_and_the_probe_goes_on(tmp_path: Path) -> None:
    config = {
        "interval_s": 0.2, "count": 1, "npu_smi": False,
        "engine_log": {"path": str(tmp_path / "x.log"), "pattern_sets": ["mine"],
                       "user_patterns": {"mine": [{"regex": "(", "kind": "count"}]}},
    }
    (reading,) = run_probe(tmp_path, config, [])
    assert "engine" not in reading
    assert any(n.startswith("engine log not followed:") for n in reading["notes"])
    assert isinstance(reading["nics"], list)


def test_log_line_time_moves_onto_the_receivers_clock() -> None:
    reading = {"t": 1000.0, "engine": {"source": "log", "log_last_line_at": 990.0}}
    sample = sample_from_reading("n", "ssh", reading, taken_at=1003.0)  # node clock 3 s behind
    assert sample.engine is not None and sample.engine.log_last_line_at == 993.0


def test_ssh_source_sends_the_log_config_and_skips_npu_smi_with_an_exporter() -> None:
    layout = parse_layout(
        """
        [[nodes]]
        name = "a"
        ssh = "a"
        engine = { log = "/var/log/run.log", log_patterns = ["vllm", "mine"] }

        [[nodes]]
        name = "b"
        ssh = "b"
        accelerator = "npu"
        metrics = ["http://b:8082/metrics"]

        [[log_patterns.mine]]
        regex = 'done (?P<requests_finished>\\d+)'
        kind = "counter"
        """
    )
    source = ssh_source_for(layout)
    assert source is not None
    a, b = source.ssh_nodes
    config_a = json.loads(source._config_json(a))
    assert config_a["engine_log"]["path"] == "/var/log/run.log"
    assert config_a["engine_log"]["user_patterns"]["mine"][0]["kind"] == "counter"
    assert "npu_smi" not in config_a
    config_b = json.loads(source._config_json(b))
    assert "engine_log" not in config_b and config_b["npu_smi"] is False
