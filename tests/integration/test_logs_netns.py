"""End to end over a real sshd in a network namespace: a process on the host writes
vLLM-style lines, the probe follows the log there, `infertop snapshot --json` reports
the acceptance and tokens/s those lines imply."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.log_writer import LOG_WRITER as WRITER
from tests.support.netns import PYTHON, NetnsCluster, missing_requirements
from tests.support.paths import infertop_bin

pytestmark = [pytest.mark.netns, pytest.mark.integration]

LINES = (
    "(APIServer pid=7) INFO 08-04 20:51:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 400.0 tokens/s, Running: 8 reqs, Waiting: 2 reqs, GPU KV cache usage: 25.0%, "
    "Prefix cache hit rate: 0.0%\n"
    "(APIServer pid=7) INFO:     10.0.0.9:41234 - \"POST /v1/completions HTTP/1.1\" 200 OK\n"
    "(APIServer pid=7) INFO 08-04 20:51:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.40, "
    "Accepted throughput: 240.00 tokens/s, Drafted throughput: 700.00 tokens/s, Accepted: 120 tokens, "
    "Drafted: 350 tokens, Per-position acceptance rate: 0.800, 0.640, 0.420, 0.260, 0.160, 0.080, 0.040, "
    "Avg Draft acceptance rate: 34.3%\n"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsCluster]:
    why = missing_requirements()
    if why is not None:
        pytest.skip(why)
    built = NetnsCluster(2, tmp_path_factory.mktemp("netns"))
    try:
        built.build()
        yield built
    finally:
        built.teardown()


def test_snapshot_reports_what_the_remote_log_implies(cluster: NetnsCluster, tmp_path: Path) -> None:
    writer_host, quiet_host = cluster.hosts
    log = writer_host.dir / "engine.log"
    log.write_text("INFO 08-04 20:50:00 [api_server.py:1] vLLM API server starting\n")
    writer = subprocess.Popen(
        ["ip", "netns", "exec", writer_host.ns, PYTHON, "-c", WRITER, str(log), LINES, "40"]
    )
    layout = tmp_path / "cluster.toml"
    layout.write_text(
        "[cluster]\nname = \"netns-logs\"\ninterval_s = 0.5\n\n"
        f"[ssh]\nconfig = {json.dumps(str(cluster.ssh_config))}\n"
        f"known_hosts = {json.dumps(str(cluster.known_hosts))}\npython = \"{PYTHON}\"\n\n"
        f"[[nodes]]\nname = \"{writer_host.alias}\"\nrole = \"decode\"\nssh = \"{writer_host.alias}\"\n"
        f"engine = {{ log = {json.dumps(str(log))}, log_interval_s = 0.5 }}\n\n"
        f"[[nodes]]\nname = \"{quiet_host.alias}\"\nrole = \"decode\"\nssh = \"{quiet_host.alias}\"\n"
        f"engine = {{ log = {json.dumps(str(quiet_host.dir / 'missing.log'))} }}\n"
    )
    try:
        out = subprocess.run(
            [infertop_bin(), "snapshot", "--layout", str(layout), "--window", "3", "--json"],
            capture_output=True, text=True, timeout=90, check=False,
        )
    finally:
        writer.kill()
        writer.wait()
    assert out.returncode == 0, out.stderr
    nodes = {n["name"]: n for n in json.loads(out.stdout)["nodes"]}
    busy = nodes[writer_host.alias]
    assert busy["status"] == "ok", busy
    engine = busy["engine"]
    assert engine["source"] == "log"
    assert engine["draft_acceptance"] == pytest.approx(120 / 350, rel=1e-6)
    assert engine["mean_acceptance_length"] == pytest.approx(3.4, rel=1e-6)
    # 400 tokens/s, arriving in 0.5 s steps: within a step or two over a 3 s window
    assert engine["accepted_tokens_per_s"] == pytest.approx(400.0, rel=0.35)
    # produced + draft tokens rejected: 400 + (350 − 120) / 0.5 s
    assert engine["full_acceptance_tokens_per_s"] == pytest.approx(860.0, rel=0.35)
    assert engine["requests_running"] == 8 and engine["requests_waiting"] == 2
    assert engine["age_s"] is not None and engine["age_s"] < 3.0
    quiet = nodes[quiet_host.alias]
    assert quiet["status"] == "ok"
    assert any("missing.log: not found" in note for note in quiet["notes"])
    assert quiet["engine"]["accepted_tokens_per_s"] is None  # unknown, never 0
