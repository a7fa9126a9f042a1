"""The `prom` source at scale: 1,024 simulated nodes (8,192 GPUs) behind one real Prometheus.

One HTTP target serves every node's engine (vLLM names), dcgm-exporter (8 GPUs × 6
gauges) and node_exporter series, each with its node's `instance` label (Prometheus
keeps them: honor_labels), ~67k series scraped every 5 s. Measured: the wall time of one
tick's queries and the client CPU it costs (process time, threads included), with and
without the per-GPU tier, and the number of series pulled. Prometheus runs on the same
machine, so its own query work competes for the same cores.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.common import Row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

NODES = 1024
GPUS = 8
INTERVAL_S = 5.0
TARGET_S = 1.0
COMMAND = "python -m benchmarks.run_all bench_prom"


def page(t0: float) -> bytes:
    dt = time.time() - t0
    lines = []
    for n in range(NODES):
        inst = f'instance="node-{n:04d}:9400"'
        for name, rate in (
            ("vllm:iteration_tokens_total_count", 40.0),
            ("vllm:spec_decode_num_drafts_total", 30.0),
            ("vllm:spec_decode_num_draft_tokens_total", 90.0),
            ("vllm:spec_decode_num_accepted_tokens_total", 63.0),
            ("vllm:generation_tokens_total", 93.0),
            ("vllm:prompt_tokens_total", 400.0),
        ):
            lines.append(f'{name}{{{inst},engine="0"}} {rate * dt + n:.3f}')
        lines.append(f'vllm:num_requests_running{{{inst},engine="0"}} 12')
        lines.append(f'vllm:num_requests_waiting{{{inst},engine="0"}} 3')
        lines.append(f'vllm:kv_cache_usage_perc{{{inst},engine="0"}} 0.42')
        for g in range(GPUS):
            gl = f'{inst},gpu="{g}",UUID="GPU-{n}-{g}",modelName="NVIDIA H200"'
            lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{gl}}} {(n + g) % 100}")
            lines.append(f"DCGM_FI_DEV_POWER_USAGE{{{gl}}} 612.5")
            lines.append(f"DCGM_FI_DEV_FB_USED{{{gl}}} 70000")
            lines.append(f"DCGM_FI_DEV_FB_FREE{{{gl}}} 11000")
            lines.append(f"DCGM_FI_DEV_GPU_TEMP{{{gl}}} 61")
            lines.append(f"DCGM_FI_DEV_SM_CLOCK{{{gl}}} 1980")
        lines.append(f'node_network_receive_bytes_total{{{inst},device="eth0"}} {5e9 * dt:.0f}')
        lines.append(f'node_network_transmit_bytes_total{{{inst},device="eth0"}} {2e9 * dt:.0f}')
        lines.append(f'node_network_up{{{inst},device="eth0"}} 1')
        lines.append(f'node_network_speed_bytes{{{inst},device="eth0"}} 5e10')
        lines.append(f"node_memory_MemTotal_bytes{{{inst}}} 2e12")
        lines.append(f"node_memory_MemAvailable_bytes{{{inst}}} 1.5e12")
        lines.append(f"node_load1{{{inst}}} 3.5")
    return ("\n".join(lines) + "\n").encode()


def serve(t0: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page(t0)
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


async def measure(url: str, every: int, rounds: int = 3) -> tuple[list[float], list[float], int]:
    from infertop.collectors.prom import PromSource
    from infertop.layouts.model import PrometheusConfig

    config = PrometheusConfig(url=url, backfill_s=0, gpu_detail_every=every, timeout_s=30)
    names = [f"node-{n:04d}" for n in range(NODES)]
    walls, cpus, count = [], [], 0
    for i in range(rounds + 1):
        # a fresh source each round: every node's samples are built, none skipped as seen
        source = PromSource(config, names, INTERVAL_S)
        source._ticks = 0 if every == 1 else 1  # 1: a tick between two per-GPU refreshes
        try:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            samples = await source.poll()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        finally:
            await source.close()
        bad = [s for s in samples if not s.ok]
        if bad:
            raise RuntimeError(f"{len(bad)} error samples, e.g. {bad[0].error}")
        count = len(samples)
        if i:  # the first round warms connections and Prometheus' caches
            walls.append(wall)
            cpus.append(cpu)
    return walls, cpus, count


def run() -> list[Row]:
    from tests.support.prometheus_server import PrometheusServer, Target, prometheus_available

    if not prometheus_available():
        return [Row("prom tick, 1,024 nodes", "skipped: no prometheus binary", "< 1 s", "info", COMMAND)]
    exporter = serve(time.time() - 1000)
    with tempfile.TemporaryDirectory() as tmp:
        server = PrometheusServer(Path(tmp), [Target(f"127.0.0.1:{exporter.server_address[1]}")],
                                  scrape_interval="5s", honor_labels=True)
        try:
            server.start()
            server.wait_for_series("vllm:generation_tokens_total", NODES, timeout_s=90)
            time.sleep(6)  # a second scrape, so every counter has history
            full = asyncio.run(measure(server.url, every=1))
            light = asyncio.run(measure(server.url, every=4))
        finally:
            server.stop()
            exporter.shutdown()
    rows = []
    for label, (walls, cpus, count) in (("engine + node + per-GPU", full), ("engine + node only", light)):
        wall = statistics.median(walls)
        cpu = statistics.median(cpus)
        rows.append(Row(
            f"prom tick, {NODES} nodes / {NODES * GPUS} GPUs, {label}: wall time",
            f"{wall:.2f} s ({count} samples)", f"< {TARGET_S:g} s",
            "met" if wall < TARGET_S else f"missed by {wall - TARGET_S:.2f} s", COMMAND,
        ))
        rows.append(Row(
            f"prom tick, {label}: client CPU", f"{cpu:.2f} s",
            f"< {INTERVAL_S:g} s interval", "info", COMMAND,
        ))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
