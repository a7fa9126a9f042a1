"""`infertop demo --via prometheus|victoriametrics`, end to end but for the viewer: the
served cluster writes a layout that reads it through the backend and the backend's scrape
config; the real backend (the system package) scrapes it from the served `/targets`; the
real `infertop snapshot --json` reads it through the prom source. The demo's scripted
trouble must come out exactly as when the nodes are scraped directly
(tests/integration/test_verdicts_demo.py), and every healthy node must be ok."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from infertop.collectors.sources.prom import prom_source_for
from infertop.demo.backends import BACKENDS, free_port, start_backend
from infertop.demo.pd_trouble import CONGESTED, DRIFTED
from infertop.demo.scenario import plan_cluster, trouble_nodes
from infertop.layouts import load_layout
from infertop.layouts.model import Layout
from tests.support.demo_server import serving_demo
from tests.support.paths import infertop_bin
from tests.support.prometheus_server import wait_until

pytestmark = pytest.mark.integration

NODES = 16
SHORT_HOLDS = "\n[thresholds]\nhold_s = 3\nclear_s = 3\nidle_hold_s = 3\n"


def series_count(url: str, promql: str) -> int:
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as resp:
        return len(json.load(resp)["data"]["result"])


@pytest.mark.parametrize("via", sorted(BACKENDS))
def test_demo_via_a_backend_finds_exactly_the_scripted_trouble(via: str, tmp_path: Path) -> None:
    binary = BACKENDS[via].binary
    if not any((Path(d) / binary).exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip(f"Debian package {BACKENDS[via].package} not installed")
    layout = tmp_path / "via.toml"
    url = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "scrape.yml"
    with serving_demo(layout, "--nodes", str(NODES), "--pages", "small", "--via", via,
                      "--via-url", url, "--scrape-config-out", str(config)):
        backend = start_backend(via, config, tmp_path / via, "127.0.0.1", int(url.rsplit(":", 1)[1]))
        try:
            # every node's three pages scraped and queryable (VictoriaMetrics shows a
            # sample only once it is 30 s old: -search.latencyOffset)
            wait_until(lambda: series_count(url, "vllm:num_requests_running") >= NODES, 90, "every engine")
            wait_until(lambda: series_count(url, "DCGM_FI_DEV_GPU_UTIL") >= NODES * 8, 30, "every GPU")
            if via == "prometheus":  # and the first evaluation of the shipped rules
                wait_until(lambda: series_count(url, "infertop_node:gpu_timestamp") >= NODES, 30, "rules")
            short = tmp_path / "short-holds.toml"
            short.write_text(layout.read_text() + SHORT_HOLDS)
            proc = subprocess.run(
                [infertop_bin(), "snapshot", "--layout", str(short), "--window", "10", "--json"],
                capture_output=True, text=True, timeout=120,
            )
            recorded = asyncio.run(queries_read(load_layout(layout)))
        finally:
            backend.terminate()
            backend.wait(10)
    assert proc.returncode == 0, proc.stderr
    # no library's log line reaches the user (urllib3's "Connection pool is full,
    # discarding connection" did, on every snapshot: the pool was narrower than the threads)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("infertop")] == [], proc.stderr
    snapshot = json.loads(proc.stdout)
    nodes = {n["name"]: n for n in snapshot["nodes"]}
    assert len(nodes) == NODES
    assert all(n["status"] == "ok" for n in nodes.values()), ([
        (n["name"], n["status"], n["error"], n["age_s"]) for n in nodes.values() if n["status"] != "ok"
    ], snapshot["backends"], snapshot["taken_at"])
    # the fleet map's groups: one per pool (each pool is one `hosts` range of the layout)
    groups = {(n["role"], n["group"]) for n in nodes.values()}
    assert sorted(groups) == [("decode", "decode-[01-12]"), ("prefill", "prefill-[01-04]")], groups
    assert all(n["sources"] == ["prom:engine", "prom:gpu", "prom:node"] for n in nodes.values())
    [backend_view] = snapshot["backends"]
    assert backend_view["name"] == f"prometheus {url}" and backend_view["behind_s"] is not None
    trouble = trouble_nodes(NODES)
    expected: dict[str, list[str]] = {name: [] for name in nodes}
    # the same verdicts as the direct scrape (test_verdicts_demo.py): its GPUs 6–7 busy but
    # waiting, from dcgm-exporter's profiling fields read through PromQL …
    expected[trouble["ports_down"]] = ["busy-waiting", "link-starved"]
    # … but for the stray process: read over SSH there, which no exporter carries
    expected[trouble["idle"]] = ["idle"]
    # its slow rank's GPU is power-capped: no throttled verdict unless throttle_on_power_cap
    expected[trouble["straggler"]] = ["straggler"]
    # the drifted setting reaches the backend as the engine's info gauge, read through PromQL
    drifted = next(p.name for p in plan_cluster(NODES) if (p.role, p.ordinal) == DRIFTED)
    expected[drifted] = ["config-drift"]
    got = {name: sorted(v["kind"] for v in n["verdicts"] if not v["pending"]) for name, n in nodes.items()}
    # the scripted congested P→D pair (pd_trouble.py): congested on both ends, as read
    # directly, established or (whether its hold falls inside this 10 s window is timing)
    # still pending
    for plan in plan_cluster(NODES):
        if (plan.role, plan.ordinal) in CONGESTED:
            assert [v["kind"] for v in nodes[plan.name]["verdicts"]] == ["congested"], plan.name
            got[plan.name] = []
    # the scripted acceptance collapse begins COLLAPSE_START_S in: whether this window
    # reaches it is timing (a loaded machine starts the demo slowly)
    collapsing = trouble.get("acceptance_collapse")
    if collapsing is not None and got.get(collapsing) == ["acceptance-drop"]:
        expected[collapsing] = ["acceptance-drop"]
    assert got == expected
    # the simulated truth of every node: 8 GPUs, the layout's ports
    for node in nodes.values():
        assert len(node["gpus"]) == 8
    # Prometheus loads the shipped rules (the demo's scrape config names them) and the
    # source reads every tier from the recorded series; VictoriaMetrics has no rules
    # (a rule over series the demo does not serve records nothing: that query stays raw)
    if via == "prometheus":
        for name in ("engine_timestamp", "engine_generation_tokens_total", "engine_steps_total",
                     "gpu_timestamp", "gpu_util_pct", "gpu_power_w", "node_timestamp", "node_ib_rx",
                     "node_ib_state", "node_eth_rx"):
            assert f"infertop_node:{name}" in recorded, (name, recorded)
    else:
        assert not [q for q in recorded if q.startswith("infertop_node:")]


async def queries_read(layout: Layout) -> list[str]:
    """The queries a prom source sends for every tier, after its first poll."""
    source = prom_source_for(layout)
    assert source is not None
    try:
        samples = await source.poll()
        assert samples and all(s.ok for s in samples), [s.error for s in samples if not s.ok][:3]
        return [q.promql for tier in ("engine", "node", "gpu") for q in source.queries(tier)]
    finally:
        await source.close()


def test_demo_via_a_missing_backend_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [infertop_bin(), "demo", "--via", "victoriametrics", "--nodes", "4"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": str(tmp_path)},
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if "Warning" not in line and line.startswith("infertop")]
    assert lines == [
        "infertop demo --via victoriametrics: `victoria-metrics` is not installed "
        "(Debian package victoria-metrics: sudo apt-get install victoria-metrics)"
    ], proc.stderr


@pytest.mark.parametrize(("nodes", "via"), [
    (16, "prometheus"), (256, "prometheus"), (1024, "prometheus"), (1024, "victoriametrics"),
])
def test_demo_via_paces_itself_for_its_size(nodes: int, via: str, tmp_path: Path) -> None:
    """Up to 32 nodes: real-size pages every 2 s, Prometheus evaluating infertop's rules
    (written beside its config); to 256 small pages every 5 s; past it every 10 s and no
    rules, the layout saying why (measured on 2 cores: docs/large-clusters.md)."""
    layout_path, config_path = tmp_path / "via.toml", tmp_path / "scrape.yml"
    url = f"http://127.0.0.1:{free_port()}"
    with serving_demo(layout_path, "--nodes", str(nodes), "--via", via, "--via-url", url,
                      "--scrape-config-out", str(config_path)):
        text = layout_path.read_text()
        layout = load_layout(layout_path)
        config = json.loads(config_path.read_text())
        [engine] = [j["http_sd_configs"][0]["url"] for j in config["scrape_configs"]
                    if j["job_name"] == "infertop-demo-engine"]
        decode = next(p.name for p in plan_cluster(nodes) if p.role == "decode" and p.trouble is None)
        page = engine.removesuffix("/targets") + f"/{decode}/metrics"
        served = urllib.request.urlopen(page, timeout=30).read()
    assert layout.prometheus is not None and layout.prometheus.url == url
    every = f"{layout.cluster.interval_s:g}s"
    assert config["global"]["scrape_interval"] == every
    pace = (layout.cluster.interval_s, layout.cluster.window_s, layout.prometheus.timeout_s)
    if nodes <= 32:
        assert pace == (2.0, 10.0, 5.0)
        assert len(served.splitlines()) > 1000  # real size: 8 data-parallel engines
        assert "on one machine" not in text
    else:
        assert pace == ((5.0, 20.0, 5.0) if nodes <= 256 else (10.0, 30.0, 10.0))
        assert len(served.splitlines()) < 400  # only what infertop reads
        assert f"# {nodes} nodes, the simulated cluster, {via} and the monitor on one machine" in text
    if nodes <= 256:
        rules = Path(config["rule_files"][0])
        assert rules.parent == tmp_path and "infertop_node:engine_timestamp" in rules.read_text()
    else:
        assert "rule_files" not in config
