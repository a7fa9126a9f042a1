"""`infertop export`: the exposition parses, carries the Snapshot's figures, and a real
Prometheus scrapes it."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.exporter import SnapshotCollector, metric_names
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.paths import infertop_bin
from tests.support.prometheus_server import (
    PrometheusServer,
    Target,
    free_port,
    prometheus_available,
)
from tests.support.waiting import until

LAYOUT = """
[cluster]
name = "export-test"
interval_s = 1.0
window_s = 10.0

[pricing]
gpu_hour_usd = 2.5

[[nodes]]
name = "decode-01"
role = "decode"
gpus = 2

[[nodes]]
name = "decode-02"
role = "decode"
gpus = 2
"""


def fed_snapshot() -> Snapshot:
    """A Monitor fed real samples: decode-01 busy for 10 s, decode-02 never heard from."""
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    for i in range(11):
        t = 990.0 + i
        monitor.fleet.ingest(NodeSample(
            node="decode-01", source="test", taken_at=t,
            gpus=[GpuSample(index=g, util_pct=90.0) for g in range(2)],
            engine=EngineSample(
                steps_total=40.0 * i, drafts_total=30.0 * i, draft_tokens_total=90.0 * i,
                accepted_tokens_total=63.0 * i, generation_tokens_total=93.0 * i,
                requests_running=7, kv_cache_usage=0.5,
            ),
        ))
    monitor.fleet.ingest(NodeSample(node="decode-02", source="test", taken_at=1_000.0,
                                 error='connection refused "quoted" \x1b[31m'))
    return monitor.tick(1_000.0)


def exposition(snapshot: Snapshot | None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot))
    return generate_latest(registry).decode()


def samples_of(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_exposition_carries_the_snapshot_figures() -> None:
    snapshot = fed_snapshot()
    got = samples_of(exposition(snapshot))
    d1 = (("node", "decode-01"), ("role", "decode"))
    assert got[("infertop_node_decode_steps_per_second", d1)] == pytest.approx(40.0)
    assert got[("infertop_node_draft_acceptance_ratio", d1)] == pytest.approx(0.7)
    assert got[("infertop_node_accepted_tokens_per_second", d1)] == pytest.approx(93.0)
    assert got[("infertop_node_full_acceptance_tokens_per_second", d1)] == pytest.approx(120.0)
    assert got[("infertop_node_idle_ratio", d1)] == 0.0
    assert got[("infertop_node_cost_usd_per_hour", d1)] == pytest.approx(5.0)
    assert got[("infertop_node_status", (*d1, ("status", "ok")))] == 1.0
    assert got[("infertop_node_status", (*d1, ("status", "error")))] == 0.0
    d2 = (("node", "decode-02"), ("role", "decode"))
    # unknown is absent, never 0
    assert ("infertop_node_decode_steps_per_second", d2) not in got
    assert ("infertop_node_idle_ratio", d2) not in got
    assert got[("infertop_node_status", (*d2, ("status", "error")))] == 1.0
    verdicts = {k[1] for k, v in got.items() if k[0] == "infertop_node_verdict" and v == 1.0}
    assert (("kind", "error"), ("node", "decode-02"), ("severity", "critical")) in verdicts
    session = snapshot.session
    assert got[("infertop_session_spend_usd", ())] == pytest.approx(session.spend_usd)
    assert got[("infertop_session_cost_usd_per_hour", ())] == pytest.approx(10.0)
    assert got[("infertop_role_accepted_tokens_per_second", (("role", "decode"),))] == pytest.approx(93.0)
    assert got[("infertop_info", (("cluster", "export-test"), ("version", "0.1.0")))] == 1.0


def test_nothing_before_the_first_snapshot() -> None:
    assert samples_of(exposition(None)) == {}


@pytest.mark.parametrize(
    ("listen", "problem"),
    [
        ("nope", "expected HOST:PORT"),
        ("127.0.0.1:99999", "port must be 1-65535"),
        ("127.0.0.1:", "expected HOST:PORT"),
        ("[zz]:9464", "is not an IPv6 address"),
        ("192.0.2.77:9464", "Cannot assign requested address"),
    ],
)
def test_bad_listen_is_one_line_exit_2(listen: str, problem: str) -> None:
    proc = subprocess.run([infertop_bin(), "export", "--listen", listen],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0] and "Traceback" not in proc.stderr


def test_busy_port_is_one_line_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run([infertop_bin(), "export", "--listen", f"127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"infertop export: --listen 127.0.0.1:{port}: Address already in use"


@pytest.mark.integration
@pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed")
def test_a_real_prometheus_scrapes_the_exporter(tmp_path: Path) -> None:
    layout = tmp_path / "here.toml"
    layout.write_text('[cluster]\nname = "scraped"\ninterval_s = 0.5\n\n[pricing]\nnode_hour_usd = 36.0\n\n'
                      '[[nodes]]\nname = "here"\nlocal = true\n')
    port = free_port()
    proc = subprocess.Popen([infertop_bin(), "export", "--layout", str(layout), "--listen", f"127.0.0.1:{port}"],
                            stderr=subprocess.PIPE, text=True)
    server = PrometheusServer(tmp_path, [Target(f"127.0.0.1:{port}")])
    try:
        server.start()
        server.wait_for_series('infertop_node_status{node="here",status="ok"} == 1', 1, timeout_s=40)
        spend = until(
            lambda: server.query("infertop_session_spend_usd > 0"), 20, "spend > 0",
            every_s=0.2, ignore=(Exception,),
        )
        assert float(spend[0]["value"][1]) > 0
        [cost] = server.query('infertop_node_cost_usd_per_hour{node="here"}')
        assert float(cost["value"][1]) == 36.0
        assert server.query('up{job="infertop-test"}')[0]["value"][1] == "1"
    finally:
        server.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0
    assert err.strip() == f"infertop export: serving http://127.0.0.1:{port}/metrics"


def test_grafana_dashboard_uses_only_exported_series() -> None:
    import json
    import re

    dashboard = json.loads((Path(__file__).resolve().parent.parent.parent / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"\binfertop_[a-z_]+", e)}
    assert used and used <= metric_names(), used - metric_names()
    # and the exporter's list is what it serves
    served = {f.name for f in text_string_to_metric_families(exposition(fed_snapshot()))}
    assert served <= metric_names()


ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, float("inf"))  # vLLM's first ITL bounds, then +Inf


def test_scoreboard_figures_in_the_json_and_the_exposition() -> None:
    """decode-01 over 10 s: 100 tokens/s each at 30 ms apart (ITL in the 25–50 ms bucket)
    on 2 GPUs with 4 running requests; decode-02 never heard from: its figures are null."""
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: 1_000.0)
    for i in range(11):
        seen = 100.0 * i
        monitor.fleet.ingest(NodeSample(
            node="decode-01", source="test", taken_at=990.0 + i,
            engine=EngineSample(
                generation_tokens_total=seen * 2, requests_running=4,
                preemptions_total=float(i), kv_transfer_bytes_total=1e6 * i,
                latency_buckets={"itl": tuple(zip(ITL_BUCKETS, (0.0, 0.0, seen, seen, seen),
                                                  strict=True))},
            ),
        ))
    snapshot = monitor.tick(1_000.0)
    data = snapshot.to_json_dict()
    engine = data["nodes"][0]["engine"]  # type: ignore[index]
    assert 0.025 <= engine["itl_p50_s"] <= 0.05 and 0.025 <= engine["itl_p99_s"] <= 0.05
    assert engine["ttft_p50_s"] is None and engine["queue_p99_s"] is None
    assert engine["preemptions_per_s"] == pytest.approx(1.0)
    assert engine["kv_transfer_bytes_per_s"] == pytest.approx(1e6)
    assert engine["prefix_cache_hit_rate"] is None
    assert "window_latency_buckets" not in engine
    session = data["session"]
    assert engine["output_tokens_per_s_per_gpu"] == pytest.approx(200.0 / 2)
    # the pool divides by every decode GPU reserved, the silent node's too
    assert session["output_tokens_per_s_per_gpu"] == pytest.approx(200.0 / 4)  # type: ignore[index]
    assert session["output_tokens_per_s_per_user"] == pytest.approx(200.0 / 4)  # type: ignore[index]
    got = samples_of(exposition(snapshot))
    d1 = (("node", "decode-01"), ("role", "decode"))
    assert 0.025 <= got[("infertop_node_itl_p99_seconds", d1)] <= 0.05
    assert got[("infertop_role_output_tokens_per_second_per_gpu", (("role", "decode"),))] == pytest.approx(50.0)
    assert got[("infertop_session_output_tokens_per_second_per_user", ())] == pytest.approx(50.0)
    assert ("infertop_node_ttft_p50_seconds", d1) not in got  # unknown is absent
    assert {"infertop_node_itl_p99_seconds", "infertop_role_prefix_cache_hit_ratio"} <= metric_names()
def test_the_monitors_own_lag_is_exported_as_its_own() -> None:
    from infertop.monitor.health import health_view

    view = health_view(1.0, lag_s=1.4, stall_max_s=2.5, stalled_fraction=0.5, cpu_pct=100.0,
                       nodes_excused=7, advice="try interval_s = 2")
    snapshot = fed_snapshot().model_copy(update={"monitor": view})
    got = samples_of(exposition(snapshot))
    assert got[("infertop_monitor_lagging", ())] == 1.0
    assert got[("infertop_monitor_lag_seconds", ())] == pytest.approx(1.4)
    assert got[("infertop_monitor_loop_stall_max_seconds", ())] == pytest.approx(2.5)
    assert got[("infertop_monitor_cpu_ratio", ())] == pytest.approx(1.0)
    assert got[("infertop_monitor_nodes_excused", ())] == 7.0
    assert {name for name, _ in got if name.startswith("infertop_monitor_")} <= metric_names()
    # the lag is the monitor's: no node's status moved for it
    assert got[("infertop_node_status", (("node", "decode-01"), ("role", "decode"), ("status", "ok")))] == 1.0


def test_the_detail_read_is_exported() -> None:
    """How much per-GPU detail a tick read through the prom source, and a rotated node's
    per-GPU age; nothing where no prom source reads detail (unknown is absent)."""
    from infertop.monitor.snapshot import DetailView

    plain = samples_of(exposition(fed_snapshot()))
    assert not any(name.startswith("infertop_detail_") or name == "infertop_node_gpus_age_seconds"
                   for name, _ in plain)
    base = fed_snapshot()
    nodes = [n.model_copy(update={"gpus_age_s": 24.0}) if n.name == "decode-01" else n for n in base.nodes]
    detail = DetailView(nodes=124, of=1250, every_s=30.0, wanted=40, note="detail for 124 of 1,250 …")
    got = samples_of(exposition(base.model_copy(update={"detail": detail, "nodes": nodes})))
    assert got[("infertop_detail_nodes", ())] == 124.0
    assert got[("infertop_detail_every_seconds", ())] == 30.0
    assert got[("infertop_node_gpus_age_seconds", (("node", "decode-01"), ("role", "decode")))] == 24.0
    assert {name for name, _ in got if name.startswith("infertop_detail_")} <= metric_names()
