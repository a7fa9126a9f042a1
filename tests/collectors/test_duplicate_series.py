"""Duplicate series (issue 19, "Smaller"): two identical series on one page (`running 5`
and `running 7`) were summed silently (shown as 12). A series exposed twice is an exporter
bug, not two engines: the first value is kept, as Prometheus does
(prometheus/prometheus#12933), and the node gets a note. Real pages from a real server,
read by the scrape source and by the SSH side of the real probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertop.collectors.sources.ssh import ProbeLines, SshNode, SshSource
from tests.support.hostile_server import check_figure, growing, serving, snapshot_of, vllm_page
from tests.support.probe_run import no_more, probe_reading

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


def test_duplicate_series_fetched_by_the_probe_are_not_summed(tmp_path: Path) -> None:
    """The SSH path: the probe fetches the page on the node, the monitor parses it."""
    with serving({"engine": lambda n, t: vllm_page(running=5, extra=RUNNING_TWICE)}) as server:
        reading = probe_reading(tmp_path, server.url("engine"))
    source = SshSource([SshNode("n1", "n1", engine_url=server.url("engine"))], interval_s=1.0)
    sample = source._sample(source.ssh_nodes[0], json.dumps(reading).encode(), ProbeLines(no_more))
    assert sample is not None and sample.error is None and sample.engine is not None
    assert sample.engine.requests_running == 5.0
    assert any("duplicate series of vllm:num_requests_running" in n for n in sample.notes), sample.notes
