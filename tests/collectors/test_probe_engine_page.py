"""The engine page the SSH probe fetches on the node's side reports its outcome like a
scraped page: a dead one is the reason the engine is unknown (coverage), its URL and
error redacted. The real bundled probe, against a real closed port."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from infertop.collectors.sources.ssh import ProbeLines, SshNode, SshSource
from infertop.layouts.model import EngineConfig, NodeConfig
from infertop.monitor.evaluation.coverage import node_coverage
from tests.support.probe_run import no_more, probe_reading


def dead_url() -> str:
    """A loopback port nobody listens on, with a password and a token in the URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://admin:hunter22@127.0.0.1:{port}/metrics?token=s3cr3tvalue"


def test_a_dead_engine_page_fetched_by_the_probe_is_the_engines_reason(tmp_path: Path) -> None:
    url = dead_url()
    reading = probe_reading(tmp_path, url)
    source = SshSource([SshNode("n1", "n1", engine_url=url)], interval_s=1.0)
    sample = source._sample(source.ssh_nodes[0], json.dumps(reading).encode(), ProbeLines(no_more))
    assert sample is not None and sample.ok and sample.engine is None
    [page] = sample.pages
    assert (page.kind, page.ok, page.parts) == ("engine", False, ("engine",))
    assert page.error
    for text in (page.url, page.error):
        assert "hunter22" not in text and "s3cr3tvalue" not in text
    config = NodeConfig(name="n1", ssh="n1", engine=EngineConfig(url=url))
    [gap] = node_coverage(config, [sample], [], [], None)
    assert gap.kind == "engine" and gap.detail == f"engine unknown: engine page failed ({page.error})"
    assert "hunter22" not in gap.detail
