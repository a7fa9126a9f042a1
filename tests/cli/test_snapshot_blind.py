"""`infertop snapshot` (the real command) on a node whose one port-reading page is dead
while its dcgm-exporter page answers: the JSON carries `verdicts: [{kind: "blind", detail}]`
with the dead page as the reason, the node's `coverage` and `cluster.blind_nodes`; the
text table names the verdict and prints the reason."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infertop_cmd import run_infertop
from tests.support.port_file_process import stop, wait_for_port

EXPORTER = Path(__file__).parent.parent / "support" / "netns_exporter.py"


@pytest.fixture
def dcgm_url(tmp_path: Path) -> Iterator[str]:
    port_file = tmp_path / "dcgm.port"
    proc = subprocess.Popen([sys.executable, str(EXPORTER), "dcgm", "127.0.0.1", "0", str(port_file)])
    try:
        yield f"http://127.0.0.1:{wait_for_port(proc, port_file, 'dcgm page')}/metrics"
    finally:
        stop(proc)


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


def test_snapshot_reports_a_blind_node_with_its_reason(tmp_path: Path, dcgm_url: str) -> None:
    dead = dead_url()
    layout = tmp_path / "blind.toml"
    layout.write_text(f"""
[cluster]
name = "blind-cli"
interval_s = 0.25

[thresholds]
hold_s = 0.5

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 2
metrics = ["{dcgm_url}", "{dead}"]
nics = [{{ name = "lo" }}]
""")
    as_json, as_text = run_infertop(
        ["snapshot", "--layout", str(layout), "--window", "1.5", "--json"],
        ["snapshot", "--layout", str(layout), "--window", "1.5"],
    )
    assert as_json.returncode == 0, as_json.stderr
    # never read right and not on a usual port: named only as an exporter page, and still
    # the one explanation for the ports being unknown
    reason = f"links unknown: exporter page failed (cannot connect to {dead})"
    data = json.loads(as_json.stdout)
    [node] = data["nodes"]
    assert node["status"] == "ok"
    assert [(v["kind"], v["detail"], v["severity"]) for v in node["verdicts"]] == [("blind", reason, "warning")]
    assert node["coverage"] == [{"kind": "ports", "detail": reason, "shared": False}]
    assert data["cluster"]["blind_nodes"] == 1
    assert as_text.returncode == 0, as_text.stderr
    row = next(line for line in as_text.stdout.splitlines() if line.startswith("decode-01"))
    assert row.rstrip().endswith("blind")
    assert f"unseen decode-01: {reason}" in as_text.stdout
