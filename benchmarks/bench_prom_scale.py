"""The prom source's cost curve: one round's wall time and client CPU at 256 / 1,024 /
4,096 simulated nodes (8 GPUs and 8 IB ports each), read from a real Prometheus (raw
series, and the shipped recording rules) and from a real VictoriaMetrics.

One HTTP target serves every node's engine (vLLM names), dcgm-exporter and node_exporter
series with its `instance` label (honor_labels), scraped every 5 s; the backend runs on
the same machine, so its query work competes for the same cores. A round here is the
full one (engine, node and per-GPU tiers); the source itself asks for the per-GPU tier
only every `gpu_detail_every` rounds past 4,096 GPUs (collectors/prom.py).

    python -m benchmarks.run_all bench_prom_scale
    INFERTOP_BENCH_PROM_NODES=256,1024 python -m benchmarks.run_all bench_prom_scale
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.common import Row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

SIZES = tuple(int(n) for n in os.environ.get("INFERTOP_BENCH_PROM_NODES", "256,1024,4096").split(","))
GPUS = 8
IB_PORTS = 8
SCRAPE_S = 5.0
TARGET_S = 1.0  # a tick's queries, 4,096 nodes with the recording rules (issue 34)
COMMAND = "python -m benchmarks.run_all bench_prom_scale"
RULES = Path(__file__).resolve().parent.parent / "docs" / "prometheus" / "infertop-rules.yml"


def page(t0: float, nodes: int) -> bytes:
    dt = time.time() - t0
    lines = []
    for n in range(nodes):
        inst = f'instance="node-{n:04d}:9400"'
        for name, rate in (
            ("vllm:iteration_tokens_total_count", 40.0), ("vllm:spec_decode_num_drafts_total", 30.0),
            ("vllm:spec_decode_num_draft_tokens_total", 90.0),
            ("vllm:spec_decode_num_accepted_tokens_total", 63.0),
            ("vllm:generation_tokens_total", 93.0), ("vllm:prompt_tokens_total", 400.0),
        ):
            lines.append(f'{name}{{{inst},engine="0"}} {rate * dt + n:.3f}')
        lines.append(f'vllm:num_requests_running{{{inst},engine="0"}} 12')
        lines.append(f'vllm:kv_cache_usage_perc{{{inst},engine="0"}} 0.42')
        for g in range(GPUS):
            gl = f'{inst},gpu="{g}",UUID="GPU-{n}-{g}",modelName="NVIDIA H200"'
            for metric, value in (("DCGM_FI_DEV_GPU_UTIL", (n + g) % 100), ("DCGM_FI_DEV_POWER_USAGE", 612.5),
                                  ("DCGM_FI_DEV_FB_USED", 70000), ("DCGM_FI_DEV_FB_FREE", 11000),
                                  ("DCGM_FI_DEV_GPU_TEMP", 61), ("DCGM_FI_DEV_SM_CLOCK", 1980)):
                lines.append(f"{metric}{{{gl}}} {value}")
        for p in range(IB_PORTS):
            pl = f'{inst},device="mlx5_{p}",port="1"'
            lines.append(f"node_infiniband_port_data_received_bytes_total{{{pl}}} {4e10 * dt:.0f}")
            lines.append(f"node_infiniband_port_data_transmitted_bytes_total{{{pl}}} {4e10 * dt:.0f}")
            lines.append(f"node_infiniband_state_id{{{pl}}} 4")
            lines.append(f"node_infiniband_rate_bytes_per_second{{{pl}}} 5e10")
        lines.append(f'node_network_receive_bytes_total{{{inst},device="eth0"}} {5e9 * dt:.0f}')
        lines.append(f'node_network_transmit_bytes_total{{{inst},device="eth0"}} {2e9 * dt:.0f}')
        lines.append(f'node_network_up{{{inst},device="eth0"}} 1')
        lines.append(f"node_memory_MemTotal_bytes{{{inst}}} 2e12")
        lines.append(f"node_memory_MemAvailable_bytes{{{inst}}} 1.5e12")
        lines.append(f"node_load1{{{inst}}} 3.5")
    return ("\n".join(lines) + "\n").encode()


def serve(t0: float, nodes: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page(t0, nodes)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def measure(url: str, nodes: int, node_label: str | list[str], rounds: int = 3) -> tuple[float, float, bool]:
    """Median wall and CPU of a full round; whether it read recorded series."""
    from infertop.collectors.prom import PromSource
    from infertop.layouts.model import PrometheusConfig

    config = PrometheusConfig(url=url, backfill_s=0, gpu_detail_every=1, timeout_s=60, node_label=node_label)
    names = [f"node-{n:04d}" for n in range(nodes)]
    walls, cpus, recorded = [], [], False
    for i in range(rounds + 1):
        source = PromSource(config, names, SCRAPE_S)  # fresh: every node's samples built
        try:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            samples = await source.poll()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            recorded = any(q.promql.startswith("infertop_node:") for q in source.queries("gpu"))
        finally:
            await source.close()
        bad = [s for s in samples if not s.ok]
        if bad or len({s.node for s in samples}) < nodes:
            raise RuntimeError(f"{len(bad)} error samples, {len({s.node for s in samples})} nodes")
        if i:  # the first round warms connections and the backend's caches
            walls.append(wall)
            cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus), recorded


def _rows(label: str, nodes: int, wall: float, cpu: float) -> list[Row]:
    target = f"< {TARGET_S:g} s at 4,096 with rules" if nodes == 4096 and "rules" in label else "info"
    verdict = ("met" if wall < TARGET_S else f"missed by {wall - TARGET_S:.2f} s") if target != "info" else "info"
    return [
        Row(f"prom round, {nodes:,} nodes / {nodes * GPUS:,} GPUs, {label}: wall", f"{wall:.2f} s",
            target, verdict, COMMAND),
        Row(f"prom round, {nodes:,} nodes, {label}: client CPU", f"{cpu:.2f} s", "info", "info", COMMAND),
    ]


def _one_size(nodes: int) -> list[Row]:
    from tests.support.prometheus_server import PrometheusServer, Target, prometheus_available
    from tests.support.victoria_server import VictoriaMetricsServer, victoria_available

    rows: list[Row] = []
    exporter = serve(time.time() - 1000, nodes)
    target = Target(f"127.0.0.1:{exporter.server_address[1]}")
    try:
        if prometheus_available():
            with tempfile.TemporaryDirectory() as tmp:
                prom = PrometheusServer(Path(tmp), [target], scrape_interval=f"{SCRAPE_S:g}s", honor_labels=True,
                                        rule_files=[RULES])
                try:
                    prom.start()
                    prom.wait_for_series("infertop_node:gpu_timestamp", nodes, timeout_s=180)
                    time.sleep(SCRAPE_S + 1)
                    wall, cpu, _ = asyncio.run(measure(prom.url, nodes, "instance"))
                    rows += _rows("Prometheus, raw series", nodes, wall, cpu)
                    wall, cpu, recorded = asyncio.run(measure(prom.url, nodes, ["node", "instance"]))
                    if not recorded:
                        raise RuntimeError("the recorded series were not read")
                    rows += _rows("Prometheus, recording rules", nodes, wall, cpu)
                finally:
                    prom.stop()
        if victoria_available():
            with tempfile.TemporaryDirectory() as tmp:
                vm = VictoriaMetricsServer(Path(tmp), [target], scrape_interval=f"{SCRAPE_S:g}s",
                                           honor_labels=True, latency_offset="2s")
                try:
                    vm.start()
                    vm.wait_for_series("DCGM_FI_DEV_GPU_UTIL", nodes * GPUS, timeout_s=180)
                    time.sleep(SCRAPE_S + 3)
                    wall, cpu, _ = asyncio.run(measure(vm.url, nodes, "instance"))
                    rows += _rows("VictoriaMetrics, raw series", nodes, wall, cpu)
                finally:
                    vm.stop()
    finally:
        exporter.shutdown()
    return rows


def run() -> list[Row]:
    rows: list[Row] = []
    for nodes in SIZES:
        try:
            rows += _one_size(nodes)
        except (RuntimeError, AssertionError) as exc:  # e.g. the backend cannot ingest that many here
            rows.append(Row(f"prom round, {nodes:,} nodes", f"not measured: {str(exc)[:160]}", "info", "info",
                            COMMAND))
    if not rows:
        rows.append(Row("prom round at scale", "skipped: neither prometheus nor victoria-metrics installed",
                        "info", "info", COMMAND))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
