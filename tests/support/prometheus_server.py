"""A real Prometheus (Debian's /usr/bin/prometheus) for tests, and simulated exporters.

`PrometheusServer` writes its own config (scrape and evaluation every second), listens on a
free loopback port that it keeps across restarts, and stores its TSDB in a temporary
folder. `SimNode` serves, on its own port, what one inference node's exporters serve:
vLLM engine metrics, dcgm-exporter GPU gauges and node_exporter NIC / host figures —
built with prometheus_client, counters advancing at fixed rates with wall-clock time so
that a test knows the exact rate every source should derive.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from tests.support.metrics_backend import ScrapingBackend, Target, free_port, wait_until

PROMETHEUS_BIN = shutil.which("prometheus") or "/usr/bin/prometheus"

__all__ = ["PrometheusServer", "SimNode", "SimRates", "Target", "free_port", "prometheus_available", "wait_until"]


def hashmod(value: str, modulus: int) -> int:
    """Prometheus' `hashmod` relabel action: the MD5 of the value, its last 8 bytes as a
    big-endian integer, modulo `modulus` (model/relabel/relabel.go)."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus


def prometheus_available() -> bool:
    return Path(PROMETHEUS_BIN).exists()


class PrometheusServer(ScrapingBackend):
    name = "prometheus"
    health_path = "/-/ready"

    def __init__(
        self,
        workdir: Path,
        targets: Sequence[Target] = (),
        scrape_interval: str = "1s",
        honor_labels: bool = False,
        rule_files: Sequence[Path] = (),
        alertmanagers: Sequence[str] = (),
        shard: tuple[int, int] | None = None,
        federate: Sequence[str] = (),
    ):
        """`shard` (i, n): scrape only the targets whose address hashes to i of n (`hashmod`
        relabelling, as a sharded fleet splits its scrapes). `federate`: host:port of other
        Prometheus servers whose series this one pulls from their /federate (a global layer)."""
        super().__init__(workdir, targets, scrape_interval, honor_labels)
        self.rule_files = list(rule_files)
        self.alertmanagers = list(alertmanagers)  # host:port of each
        self.shard = shard
        self.federate = list(federate)

    def write_config(self) -> Path:
        config = self.scrape_config()
        if self.shard is not None:
            index, count = self.shard
            for job in config["scrape_configs"]:
                job["relabel_configs"] = [
                    {"source_labels": ["__address__"], "modulus": count, "target_label": "__tmp_hash",
                     "action": "hashmod"},
                    {"source_labels": ["__tmp_hash"], "regex": str(index), "action": "keep"},
                ]
        if self.federate:
            config["scrape_configs"].append({
                "job_name": "federate", "honor_labels": True, "metrics_path": "/federate",
                "params": {"match[]": ['{job=~"infertop-test.*"}']},
                "static_configs": [{"targets": self.federate}],
            })
        config["global"]["evaluation_interval"] = self.scrape_interval
        if self.rule_files:
            config["rule_files"] = [str(f) for f in self.rule_files]
        if self.alertmanagers:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": self.alertmanagers}]}]}
        path = self.workdir / "prometheus.yml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML: no YAML library needed
        return path

    def command(self) -> list[str]:
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        return [
            PROMETHEUS_BIN,
            f"--config.file={self.write_config()}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ]


# ---------------------------------------------------------------------------- simulated node


@dataclass
class SimRates:
    """Per-second rates and levels one simulated node runs at."""

    steps_per_s: float = 40.0
    drafts_per_s: float = 30.0
    draft_tokens_per_s: float = 90.0
    accepted_per_s: float = 63.0
    # of those, at draft positions 0, 1, 2 (non-increasing, summing to accepted_per_s)
    accepted_by_position_per_s: tuple[float, ...] = (27.0, 21.0, 15.0)
    generation_per_s: float = 93.0
    prompt_per_s: float = 400.0
    running: float = 12.0
    waiting: float = 3.0
    kv_usage: float = 0.42
    gpus: int = 8
    util_pct: float = 87.0
    sm_active: float = 0.64  # DCGM's SM activity ratio of GPU 0 (GPU i: i/100 less)
    power_w: float = 612.5
    nic_rx_bytes_per_s: float = 5e9
    nic_tx_bytes_per_s: float = 2e9


class SimNodeCollector(Collector):
    def __init__(self, name: str, rates: SimRates, t0: float):
        self.name = name
        self.rates = rates
        self.t0 = t0

    def collect(self) -> Iterable[Any]:
        r = self.rates
        dt = time.time() - self.t0
        labels = ["model_name", "engine"]
        lv = ["deepseek-v4", "0"]

        def counter(name: str, per_s: float) -> CounterMetricFamily:
            fam = CounterMetricFamily(name, name, labels=labels)
            fam.add_metric(lv, per_s * dt)
            return fam

        def gauge(name: str, value: float) -> GaugeMetricFamily:
            fam = GaugeMetricFamily(name, name, labels=labels)
            fam.add_metric(lv, value)
            return fam

        steps = HistogramMetricFamily("vllm:iteration_tokens_total", "tokens per step", labels=labels)
        n = r.steps_per_s * dt
        steps.add_metric(lv, [("1.0", 0.0), ("+Inf", n)], sum_value=n * 8)
        yield steps
        # every inter-token gap 30 ms (vLLM's 25–50 ms bucket), one per generated token
        itl = HistogramMetricFamily("vllm:inter_token_latency_seconds", "ITL", labels=labels)
        g = r.generation_per_s * dt
        itl.add_metric(lv, [("0.025", 0.0), ("0.05", g), ("+Inf", g)], sum_value=g * 0.03)
        yield itl
        yield counter("vllm:num_preemptions", 0.5)
        yield counter("vllm:spec_decode_num_drafts", r.drafts_per_s)
        yield counter("vllm:spec_decode_num_draft_tokens", r.draft_tokens_per_s)
        yield counter("vllm:spec_decode_num_accepted_tokens", r.accepted_per_s)
        per_pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos", "per position",
                                      labels=[*labels, "position"])
        for position, per_s in enumerate(r.accepted_by_position_per_s):
            per_pos.add_metric([*lv, str(position)], per_s * dt)
        yield per_pos
        yield counter("vllm:generation_tokens", r.generation_per_s)
        yield counter("vllm:prompt_tokens", r.prompt_per_s)
        yield gauge("vllm:num_requests_running", r.running)
        yield gauge("vllm:num_requests_waiting", r.waiting)
        yield gauge("vllm:kv_cache_usage_perc", r.kv_usage)
        gpu_labels = ["gpu", "UUID", "modelName", "Hostname"]
        dcgm = {
            "DCGM_FI_DEV_GPU_UTIL": lambda i: r.util_pct - i,
            "DCGM_FI_DEV_POWER_USAGE": lambda i: r.power_w + i,
            "DCGM_FI_DEV_FB_USED": lambda i: 70000.0 + i,
            "DCGM_FI_DEV_FB_FREE": lambda i: 11000.0,
            "DCGM_FI_DEV_FB_RESERVED": lambda i: 512.0,
            # profiling (DCP) ratios: SM activity 0.64 - i/100, tensor 0.4, DRAM 0.3, occupancy 0.2
            "DCGM_FI_PROF_SM_ACTIVE": lambda i: r.sm_active - i / 100.0,
            "DCGM_FI_PROF_SM_OCCUPANCY": lambda i: 0.2,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": lambda i: 0.4,
            "DCGM_FI_PROF_DRAM_ACTIVE": lambda i: 0.3,
            "DCGM_FI_DEV_GPU_TEMP": lambda i: 60.0 + i,
            "DCGM_FI_DEV_SM_CLOCK": lambda i: 1980.0,
        }
        for metric, value in dcgm.items():
            fam = GaugeMetricFamily(metric, metric, labels=gpu_labels)
            for i in range(r.gpus):
                fam.add_metric([str(i), f"GPU-{self.name}-{i}", "NVIDIA H200", self.name], value(i))
            yield fam
        for metric, per_s in (
            ("node_network_receive_bytes", r.nic_rx_bytes_per_s),
            ("node_network_transmit_bytes", r.nic_tx_bytes_per_s),
        ):
            cfam = CounterMetricFamily(metric, metric, labels=["device"])
            cfam.add_metric(["eth0"], per_s * dt)
            cfam.add_metric(["lo"], 1000.0 * dt)
            yield cfam
        up = GaugeMetricFamily("node_network_up", "up", labels=["device"])
        up.add_metric(["eth0"], 1.0)
        yield up
        speed = GaugeMetricFamily("node_network_speed_bytes", "speed", labels=["device"])
        speed.add_metric(["eth0"], 400e9 / 8)
        yield speed
        yield GaugeMetricFamily("node_memory_MemTotal_bytes", "mem", value=2.0e12)
        yield GaugeMetricFamily("node_memory_MemAvailable_bytes", "mem", value=1.5e12)
        yield GaugeMetricFamily("node_load1", "load", value=3.5)


def serve_text(port: int, registry: CollectorRegistry) -> ThreadingHTTPServer:
    """Serve the registry in the classic text format (0.0.4), whatever the client accepts.

    prometheus_client's own server answers Prometheus' OpenMetrics request with `:` in
    metric names escaped to `_`; real vLLM names keep their colons, so tests must too.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # scrape timed out
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class SimNode:
    """One simulated node's exporters on one loopback port."""

    def __init__(self, name: str, rates: SimRates | None = None):
        self.name = name
        self.rates = rates or SimRates()
        self.port = free_port()
        self.registry = CollectorRegistry()
        self.registry.register(SimNodeCollector(name, self.rates, time.time() - 1000.0))
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> SimNode:
        self._server = serve_text(self.port, self.registry)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def target(self) -> Target:
        # the instance label a real deployment has: host:exporter-port
        return Target(f"127.0.0.1:{self.port}", {"instance": f"{self.name}:9400"})
