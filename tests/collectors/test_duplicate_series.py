"""Duplicate series (issue 19, "Smaller"): two identical series on one page (`running 5`
and `running 7`) were summed silently (shown as 12). A series exposed twice is an exporter
bug, not two engines: the first value is kept, as Prometheus does
(prometheus/prometheus#12933), and the node gets a note. Real pages from a real server,
read by the scrape source and by the SSH side of the real probe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hostile_server import check_figure, growing, serving, snapshot_of, vllm_page

from collectors.probe.bundle import probe_script
from collectors.ssh import ProbeLines, SshNode, SshSource

pytestmark = pytest.mark.hostile

RUNNING_TWICE = 'vllm:num_requests_running{engine="0"} 7\n'


async def test_a_gauge_exposed_twice_keeps_its_first_value_with_a_note() -> None:
    pages = {"engine": lambda n, t: vllm_page(running=5, extra=RUNNING_TWICE)}
    await check_figure(pages, ("engine", "requests_running"), 5.0,
                       "duplicate series of vllm:num_requests_running")


async def test_a_counter_exposed_twice_is_not_counted_twice() -> None:
    """The same counter line twice: 100 tokens a scrape every 0.25 s is ~400 tokens/s,
    never ~800."""
    def page(n: int, t: float) -> str:
        value = growing(100.0)(n, t)
        return vllm_page(value, extra=f'vllm:generation_tokens_total{{engine="0"}} {value}\n')

    snapshot = await snapshot_of({"engine": page})
    [node] = snapshot.nodes
    assert node.engine is not None and node.engine.accepted_tokens_per_s is not None
    assert 200 < node.engine.accepted_tokens_per_s < 600
    assert any("duplicate series of vllm:generation_tokens_total" in n for n in node.notes), node.notes


PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable



async def _no_more(size: int) -> bytes:
    return b""  # the stream behind the one line handed to _sample directly

def probe_reading(tmp_path: Path, engine_url: str) -> dict[str, Any]:
    """One reading of the real bundled probe, which fetched `engine_url` on its side."""
    (tmp_path / "empty").mkdir()
    script = tmp_path / "probe.py"
    script.write_text(probe_script())
    config = {"interval_s": 0.05, "count": 1, "engine": {"url": engine_url, "timeout_s": 2}}
    result = subprocess.run([PYTHON, "-I", str(script), json.dumps(config)],
                            cwd=tmp_path / "empty", capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    reading: dict[str, Any] = json.loads(result.stdout.splitlines()[0])
    return reading


def test_duplicate_series_fetched_by_the_probe_are_not_summed(tmp_path: Path) -> None:
    """The SSH path: the probe fetches the page on the node, the monitor parses it."""
    with serving({"engine": lambda n, t: vllm_page(running=5, extra=RUNNING_TWICE)}) as server:
        reading = probe_reading(tmp_path, server.url("engine"))
    source = SshSource([SshNode("n1", "n1", engine_url=server.url("engine"))], interval_s=1.0)
    sample = source._sample(source.ssh_nodes[0], json.dumps(reading).encode(), ProbeLines(_no_more))
    assert sample is not None and sample.error is None and sample.engine is not None
    assert sample.engine.requests_running == 5.0
    assert any("duplicate series of vllm:num_requests_running" in n for n in sample.notes), sample.notes
