"""The demo cluster: its plan, its pages, and end to end through `infertop snapshot`."""

from __future__ import annotations

import json
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.demo.render import dcgm_page, engine_page, node_exporter_page
from infertop.demo.scenario import (
    NUM_SPEC_TOKENS,
    POWER_CAPPED_GPU,
    SimCluster,
    plan_cluster,
    pool_sizes,
    restart_order,
    trouble_nodes,
)
from infertop.demo.ssh_node import ENGINE_PID_BASE, STRAY_COMMAND, STRAY_GPU, STRAY_PID, STRAY_USER
from tests.support.demo_server import serving_demo, wait_for_layout
from tests.support.paths import infertop_bin

# ---------------------------------------------------------------------------- plan


def test_pools_are_about_a_quarter_prefill() -> None:
    assert pool_sizes(16) == (4, 12)
    assert pool_sizes(2) == (1, 1)
    assert pool_sizes(3) == (1, 2)
    assert pool_sizes(128) == (32, 96)
    assert pool_sizes(1024) == (256, 768)
    with pytest.raises(ValueError):
        pool_sizes(1)


def test_trouble_is_deterministic_and_documented() -> None:
    assert trouble_nodes(16) == {"ports_down": "decode-03", "idle": "prefill-02", "straggler": "decode-07",
                                 "stray_process": "decode-09", "acceptance_collapse": "decode-04"}
    # a cluster too small for a straggler or an idle prefill node simply has none
    assert trouble_nodes(4) == {"ports_down": "decode-03"}
    names = [p.name for p in plan_cluster(1024)]
    assert names[0] == "prefill-001" and names[-1] == "decode-768" and len(set(names)) == 1024
    assert trouble_nodes(1024)["straggler"] == "decode-007"


def test_restarts_rotate_over_calm_nodes_and_reset_counters() -> None:
    t0 = 1_000_000.0
    cluster = SimCluster(16, started_at=t0, restart_every_s=60.0)
    order = restart_order(cluster.plans)
    assert order[0] == "decode-01" and "decode-03" not in order and "prefill-02" not in order
    first = cluster.nodes[order[0]]
    second = cluster.nodes[order[1]]
    first.advance(t0 + 59.0)
    second.advance(t0 + 59.0)
    before = first.engine.steps
    assert before > 0
    first.advance(t0 + 62.0)  # restarted at t0 + 60: only ~2 s of steps since
    assert first.restarts == 1 and first.engine.steps < before / 10
    assert first.engine_started_at == t0 + 60.0
    second.advance(t0 + 62.0)
    assert second.restarts == 0  # its turn is at t0 + 120
    second.advance(t0 + 121.0)
    assert second.restarts == 1


def test_pages_round_trip_through_the_real_parsers() -> None:
    now = time.time()
    cluster = SimCluster(16, started_at=now - 30)
    decode = cluster.nodes["decode-01"]
    e = engine_sample_from_text(engine_page(decode, now), "deepinfer")
    assert e.steps_total and e.drafts_total and e.accepted_tokens_total and e.draft_tokens_total
    assert e.draft_tokens_total == pytest.approx(e.drafts_total * NUM_SPEC_TOKENS, rel=1e-6)
    assert 0.6 <= e.accepted_tokens_total / e.draft_tokens_total <= 0.8
    # generated = one bonus token per draft + the accepted ones
    assert e.generation_tokens_total == pytest.approx(e.drafts_total + e.accepted_tokens_total, rel=1e-3)
    gpus = parts_from_exporter(parse_exposition(dcgm_page(decode, now), wanted=EXPORTER_WANTED))["gpus"]
    assert len(gpus) == 8 and all(g.name == "NVIDIA B200" for g in gpus)  # type: ignore[attr-defined]
    parts = parts_from_exporter(parse_exposition(node_exporter_page(decode, now), wanted=EXPORTER_WANTED))
    nics = {n.name: n for n in parts["nics"]}  # type: ignore[attr-defined]
    assert {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "eth0", "bond0", "lo"} <= set(nics)
    assert nics["bond0"].members == ["eth1", "eth2"] and nics["bond0"].members_up == 2
    prefill = engine_sample_from_text(engine_page(cluster.nodes["prefill-01"], now), "vllm")
    assert prefill.drafts_total is None  # no speculative decoding on the prefill pool
    assert prefill.prompt_tokens_total and prefill.ttft_seconds_count


# ---------------------------------------------------------------------------- end to end


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    layout = tmp_path_factory.mktemp("demo") / "demo.toml"
    with serving_demo(layout, "--nodes", "16", "--restart-every", "3") as proc:
        yield layout, proc


@pytest.fixture(scope="module")
def snapshot(demo: tuple[Path, subprocess.Popen[str]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    layout, _ = demo
    text = layout.read_text()
    engine_port = text.split('engine = { url = "http://127.0.0.1:', 1)[1].split("/", 1)[0]
    # a node whose endpoint is dead, and one that serves something that is not metrics
    # (the demo's own JSON target list), beside the simulated cluster
    text += (
        '\n[[nodes]]\nname = "dead-01"\nrole = "decode"\ngpus = 8\n'
        f'engine = {{ url = "http://127.0.0.1:{_dead_port()}/metrics" }}\n'
        f'metrics = ["http://127.0.0.1:{_dead_port()}/metrics"]\n'
        '\n[[nodes]]\nname = "garbage-01"\nrole = "decode"\ngpus = 8\n'
        f'engine = {{ url = "http://127.0.0.1:{engine_port}/targets" }}\n'
    )
    extended = tmp_path_factory.mktemp("snap") / "with-bad-nodes.toml"
    extended.write_text(text)
    # a host starved for a while (the suite's real vLLM engines start beside this test)
    # leaves a 4 s window with readings too close together to be rates yet: the snapshot
    # then says "settling" (None), rightly; it is taken again, at most twice, until every
    # simulated engine's readings span half the window, as tests/support/vllm_truth does
    for _ in range(3):
        out = subprocess.run(
            [infertop_bin(), "snapshot", "--layout", str(extended), "--json", "--window", "4"],
            capture_output=True, text=True, timeout=120,
        )
        assert out.returncode == 0, out.stderr
        snapshot: dict[str, Any] = json.loads(out.stdout)
        if min(_engine_span_s(n) for n in snapshot["nodes"] if n["name"].startswith(("prefill", "decode"))) >= 2:
            break
    return snapshot


def _engine_span_s(node: dict[str, Any]) -> float:
    """How far apart the engine's first and last readings in the window were (s; the
    JSON gives them as ISO 8601)."""
    engine = node.get("engine") or {}
    first, last = engine.get("window_first_reading_at"), engine.get("window_last_reading_at")
    if first is None or last is None:
        return 0.0
    return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()


def _nodes(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in snapshot["nodes"]}


def test_demo_prints_where_it_serves(demo: tuple[Path, subprocess.Popen[str]]) -> None:
    layout, proc = demo
    assert proc.poll() is None
    text = layout.read_text()
    assert 'hosts = "decode-[01-08]"' in text and "gpu_hour_usd = 10.582" in text
    # the stray-process node is read over SSH (who holds a GPU is on no exporter page),
    # in the pool's one fleet-map group
    assert 'ssh = "decode-09@127.0.0.1:' in text and text.count('group = "decode-[01-12]"') == 3


def test_every_simulated_node_is_ok_despite_the_bad_ones(snapshot: dict[str, Any]) -> None:
    nodes = _nodes(snapshot)
    assert len(nodes) == 18
    simulated = {k: v for k, v in nodes.items() if k not in ("dead-01", "garbage-01")}
    assert {n["status"] for n in simulated.values()} == {"ok"}, {k: v["error"] for k, v in simulated.items()}
    assert nodes["dead-01"]["status"] == "error"
    assert nodes["dead-01"]["error"].startswith("cannot connect to http://127.0.0.1:")
    assert nodes["garbage-01"]["status"] == "error"
    assert nodes["garbage-01"]["error"].startswith("bad exposition from http://127.0.0.1:")
    assert nodes["garbage-01"]["engine"] is None


def test_decode_figures_in_range(snapshot: dict[str, Any]) -> None:
    nodes = _nodes(snapshot)
    decode = [n for n in nodes.values() if n["role"] == "decode" and n["engine"]]
    assert len(decode) == 12
    for node in decode:
        e = node["engine"]
        # all rates stay sane although engines restart every 3 s in turn
        assert e["draft_acceptance"] is not None and 0.55 <= e["draft_acceptance"] <= 0.85, node["name"]
        assert e["mean_acceptance_length"] == pytest.approx(1 + NUM_SPEC_TOKENS * e["draft_acceptance"], rel=0.02)
        assert e["full_acceptance_tokens_per_s"] > e["accepted_tokens_per_s"] > 0
        assert 40 <= e["requests_running"] <= 70 and 0 < e["kv_cache_usage"] < 1
        if node["name"] != "decode-07":
            # a restart between two scrapes loses the steps from the last scrape to the
            # restart (as Prometheus' rate() does): with restarts every 3 s and a 4 s window
            # a node can read up to ~1/4 low, so the floor is 46 × 0.75 minus noise
            assert 30 <= e["decode_steps_per_s"] <= 62, (node["name"], e["decode_steps_per_s"])
        assert len(node["gpus"]) == 8 and node["cost_per_hour_usd"] == pytest.approx(8 * 10.582, abs=0.005)


def test_straggler_is_recognisable(snapshot: dict[str, Any]) -> None:
    nodes = _nodes(snapshot)
    peers = [n["engine"]["decode_steps_per_s"] for k, n in nodes.items()
             if n["role"] == "decode" and n["engine"] and k != "decode-07"]
    slow = nodes["decode-07"]["engine"]["decode_steps_per_s"]
    assert slow < 0.8 * statistics.median(peers)
    # and why: one GPU power-capped (SwPowerCap), lower clocks and power than the rest
    capped = [g for g in nodes["decode-07"]["gpus"] if g["clock_event_reasons"] == 0x4]
    assert [g["index"] for g in capped] == [POWER_CAPPED_GPU]
    assert capped[0]["sm_clock_mhz"] < 1500 and capped[0]["power_w"] < 600


def test_stray_process_is_read_over_ssh(snapshot: dict[str, Any]) -> None:
    """decode-09 is read by the real SSH source (the demo's SSH server answers its probe
    command with readings in the probe's shape): processes per GPU, and the finding."""
    node = _nodes(snapshot)["decode-09"]
    assert node["sources"] == ["ssh"] and node["status"] == "ok"
    held = {g["index"]: [p["pid"] for p in g["processes"]] for g in node["gpus"]}
    assert held == {i: [ENGINE_PID_BASE + i] + ([STRAY_PID] if i == STRAY_GPU else []) for i in range(8)}
    [stray] = [v for v in node["verdicts"] if v["kind"] == "stray-process"]
    assert f"GPU {STRAY_GPU} held by pid {STRAY_PID} ({STRAY_USER}) {STRAY_COMMAND[:60]}: 18.0 GiB" in stray["detail"]
    # the engine page the probe ships: the node's 8 ranks, as on the HTTP-read nodes
    assert len(node["engine"]["ranks"]) == 8 and node["engine"]["decode_steps_per_s"] > 30
    # no other node lists processes: exporters do not carry them
    assert all(g["processes"] is None for n in _nodes(snapshot).values() if n["name"] != "decode-09"
               for g in n["gpus"])


def test_idle_prefill_node_is_recognisable(snapshot: dict[str, Any]) -> None:
    idle = _nodes(snapshot)["prefill-02"]
    assert idle["idle_fraction"] == 1.0
    assert idle["engine"]["requests_running"] == 0
    assert idle["engine"]["prompt_tokens_per_s"] == 0
    assert all(g["util_pct"] < 5 for g in idle["gpus"])
    busy = _nodes(snapshot)["prefill-01"]
    assert busy["idle_fraction"] == 0.0 and busy["engine"]["prompt_tokens_per_s"] > 1000


def test_ports_down_node_is_recognisable(snapshot: dict[str, Any]) -> None:
    nodes = _nodes(snapshot)
    nics = {n["name"]: n for n in nodes["decode-03"]["nics"]}
    assert nics["mlx5_1"]["state"] == "down" and nics["mlx5_2"]["state"] == "down"
    assert nics["mlx5_0"]["state"] == "active" and nics["mlx5_0"]["expected_gbps"] == 400
    ib = [nics[p]["rx_bytes_per_s"] or 0.0 for p in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")]
    assert ib[0] / sum(ib) > 0.8  # traffic piled on one port
    healthy = {n["name"]: n for n in nodes["decode-01"]["nics"]}
    assert {healthy[p]["state"] for p in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")} == {"active"}
    assert healthy["bond0"]["members"] == ["eth1", "eth2"] and healthy["bond0"]["members_up"] == 2


def test_spend_runs_from_a_reservation_in_the_past(snapshot: dict[str, Any]) -> None:
    session = snapshot["session"]
    # 18 nodes × 8 GPUs at $10.582 (the two bad nodes are billed too: rented is rented),
    # to the cent as JSON money is (16 or 20 nodes must not pass)
    usd_per_hour = 18 * 8 * 10.582
    assert snapshot["cluster"]["total"]["cost_per_hour_usd"] == round(usd_per_hour, 2)
    assert session["elapsed_s"] >= 2 * 3600
    # every second since the reservation began, at that rate: to the cent
    assert session["spend_usd"] == pytest.approx(usd_per_hour * session["elapsed_s"] / 3600, abs=0.01)


def test_session_money_covers_one_stretch(snapshot: dict[str, Any]) -> None:
    """The demo's engines began after the reservation start (their `_created` series say
    so): their counters hold only this reservation's tokens, counted whole, and the
    session's $/1M is over the whole reservation — and says so."""
    session = snapshot["session"]
    assert session["usd_per_million_span"] == "reservation"
    assert session["tokens_since"] == session["started_at"]
    # to the newest moment every engine had been read to: within a few intervals of now
    lag_s = (session["spend_usd"] - session["span_spend_usd"]) / session["cost_per_hour_usd"] * 3600.0
    assert 0.0 <= lag_s <= 5.0
    assert session["span_s"] == pytest.approx(session["elapsed_s"] - lag_s, abs=0.05)
    # JSON money is to the cent and counts whole: the ratio agrees to 1e-3
    assert session["usd_per_million_output_tokens"] == pytest.approx(
        session["spend_usd"] / session["accepted_tokens"] * 1e6, rel=1e-3
    )
    assert session["price_window"] in ("peak", "off-peak")
    per_token = 1.2e-6 if session["price_window"] == "peak" else 0.6e-6
    # the cluster's $/h in JSON is to the cent: the figure agrees to 1e-5
    assert session["breakeven_output_tokens_per_s"] == pytest.approx(
        snapshot["cluster"]["total"]["cost_per_hour_usd"] / (per_token * 3600.0), rel=1e-5
    )


def test_roles_roll_up(snapshot: dict[str, Any]) -> None:
    roles = snapshot["cluster"]["roles"]
    assert roles["prefill"]["nodes"] == 4
    assert roles["decode"]["accepted_tokens_per_s"] > 0
    assert 0.6 <= roles["decode"]["draft_acceptance"] <= 0.8


def test_bad_node_count_is_exit_2() -> None:
    out = subprocess.run([infertop_bin(), "demo", "--nodes", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "2 to" in out.stderr


def test_serve_only_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    layout = tmp_path / "l.toml"
    proc = subprocess.Popen(
        [infertop_bin(), "demo", "--serve-only", "--nodes", "2", "--layout-out", str(layout)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for_layout(layout, proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
        assert 'hosts = "prefill-[01-01]"' in layout.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_scoreboard_figures_from_the_demo(snapshot: dict[str, Any]) -> None:
    """The demo's engines expose latency histograms and NIXL series: the snapshot has
    percentiles within plausible buckets, KV transfer on the decode pool, a live point."""
    nodes = _nodes(snapshot)
    decode = nodes["decode-01"]["engine"]
    # ITL a few tens of ms (50 steps/s, ~3 tokens a step), inside the bucket it names
    assert 0.005 < decode["itl_p50_s"] < 0.1
    assert decode["itl_p50_s"] <= decode["itl_p99_s"]
    # e2e: 900 tokens at ~155 tokens/s per request ≈ 6 s median, p99 within 3× of it
    assert 2.5 <= decode["e2e_p50_s"] <= 10.0 and decode["e2e_p99_s"] <= 30.0
    assert decode["queue_p50_s"] is not None and decode["queue_p50_s"] < 0.3
    # every request pulls ~210 MB of KV from a prefill node
    assert 2e8 < decode["kv_transfer_bytes_per_s"] < 2e10
    assert decode["preemptions_per_s"] == 0.0
    prefill = nodes["prefill-01"]["engine"]
    assert prefill["kv_transfer_bytes_per_s"] is None  # NIXL series live on the decode side
    assert prefill["prefix_cache_hit_rate"] == pytest.approx(0.35, abs=0.01)
    assert 0.1 <= prefill["ttft_p50_s"] <= 1.5
    session = snapshot["session"]
    assert 100 < session["output_tokens_per_s_per_gpu"] < 5000
    assert 50 < session["output_tokens_per_s_per_user"] < 400
    labels = [p["label"] for p in snapshot["cluster"]["reference_points"]]
    assert labels == ["EP64", "EP8"]
