"""The `prom` source's cost curve: one tick's wall time and client CPU at 256 / 1,024 /
4,096 simulated nodes (8 GPUs and 8 IB ports each), read from a real Prometheus and a
real VictoriaMetrics, each with raw series and with the shipped recording rules
(docs/prometheus/infertop-rules.yml: Prometheus evaluates them itself; for
VictoriaMetrics a vmalert evaluates them and writes the recorded series back).

One HTTP target serves every node's engine (vLLM names), dcgm-exporter and node_exporter
series with its `instance` label (honor_labels), scraped every 5 s; the backend runs on
the same machine, so its scraping, rule evaluation and query work compete for the same
two cores as the client. Two ticks are measured: the full one (engine, node and per-GPU
tiers) and the usual one (engine and node: past 4,096 GPUs the source asks for the
per-GPU tier only every `gpu_detail_every` ticks, collectors/sources/prom.py). Each is the
median of 3 after a warm-up, a fresh source each time (every node's samples built). The
load average is written beside each figure: this machine is shared.

    python -m benchmarks.run_all bench_prom
    INFERTOP_BENCH_PROM_NODES=4096 INFERTOP_BENCH_PROM_BACKENDS=prometheus python -m benchmarks.bench_prom
    INFERTOP_BENCH_PROM_NODES=4096 INFERTOP_BENCH_PROM_SERIES=rules python -m benchmarks.bench_prom
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.common import SCALE, Row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

# 4,096 nodes (a ~40 MB page, ~385k series) only with INFERTOP_BENCH_SCALE=1 (`make bench-scale-live`)
_DEFAULT_SIZES = "256,1024,4096" if SCALE else "256,1024"
SIZES = tuple(int(n) for n in os.environ.get("INFERTOP_BENCH_PROM_NODES", _DEFAULT_SIZES).split(","))
BACKENDS = tuple(os.environ.get("INFERTOP_BENCH_PROM_BACKENDS", "prometheus,victoriametrics").split(","))
SERIES = tuple(os.environ.get("INFERTOP_BENCH_PROM_SERIES", "raw,rules").split(","))  # raw series, recording rules
GPUS = 8
IB_PORTS = 8
SCRAPE_S = 5.0
TARGET_S = 1.0  # a tick's queries, 4,096 nodes with the recording rules (issue 34)
COMMAND = "python -m benchmarks.run_all bench_prom"
RULES = Path(__file__).resolve().parent.parent / "docs" / "prometheus" / "infertop-rules.yml"
ENGINE_COUNTERS = (
    ("vllm:iteration_tokens_total_count", 40.0), ("vllm:spec_decode_num_drafts_total", 30.0),
    ("vllm:spec_decode_num_draft_tokens_total", 90.0), ("vllm:spec_decode_num_accepted_tokens_total", 63.0),
    ("vllm:generation_tokens_total", 93.0), ("vllm:prompt_tokens_total", 400.0),
)


class Page:
    """The exporter page of `nodes` nodes. The gauges are written once; only the counters
    are formatted each scrape (Python must serve ~385k series within a 5 s scrape at 4,096)."""

    def __init__(self, nodes: int, t0: float):
        self.t0 = t0
        static: list[str] = []
        self.counters: list[tuple[str, float, float]] = []  # (series, per second, offset)
        for n in range(nodes):
            inst = f'instance="node-{n:04d}:9400"'
            self.counters += [(f'{name}{{{inst},engine="0"}}', rate, float(n)) for name, rate in ENGINE_COUNTERS]
            static.append(f'vllm:num_requests_running{{{inst},engine="0"}} 12')
            static.append(f'vllm:kv_cache_usage_perc{{{inst},engine="0"}} 0.42')
            for g in range(GPUS):
                gl = f'{inst},gpu="{g}",UUID="GPU-{n}-{g}",modelName="NVIDIA H200"'
                for metric, value in (("DCGM_FI_DEV_GPU_UTIL", (n + g) % 100), ("DCGM_FI_DEV_POWER_USAGE", 612.5),
                                      ("DCGM_FI_DEV_FB_USED", 70000), ("DCGM_FI_DEV_FB_FREE", 11000),
                                      ("DCGM_FI_DEV_GPU_TEMP", 61), ("DCGM_FI_DEV_SM_CLOCK", 1980)):
                    static.append(f"{metric}{{{gl}}} {value}")
            for p in range(IB_PORTS):
                pl = f'{inst},device="mlx5_{p}",port="1"'
                self.counters.append((f"node_infiniband_port_data_received_bytes_total{{{pl}}}", 4e10, 0.0))
                self.counters.append((f"node_infiniband_port_data_transmitted_bytes_total{{{pl}}}", 4e10, 0.0))
                static.append(f"node_infiniband_state_id{{{pl}}} 4")
                static.append(f"node_infiniband_rate_bytes_per_second{{{pl}}} 5e10")
            self.counters.append((f'node_network_receive_bytes_total{{{inst},device="eth0"}}', 5e9, 0.0))
            self.counters.append((f'node_network_transmit_bytes_total{{{inst},device="eth0"}}', 2e9, 0.0))
            static.append(f'node_network_up{{{inst},device="eth0"}} 1')
            static.append(f"node_memory_MemTotal_bytes{{{inst}}} 2e12")
            static.append(f"node_memory_MemAvailable_bytes{{{inst}}} 1.5e12")
            static.append(f"node_load1{{{inst}}} 3.5")
        self.static = ("\n".join(static) + "\n").encode()
        self.series = len(static) + len(self.counters)

    def body(self) -> bytes:
        dt = time.time() - self.t0
        moving = "\n".join(f"{series} {rate * dt + offset:.3f}" for series, rate, offset in self.counters)
        return self.static + moving.encode() + b"\n"


def serve(page: Page) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.body()
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
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def measure(url: str, nodes: int, node_label: str | list[str], full: bool,
                  rounds: int = 3) -> tuple[float, float, bool]:
    """Median wall and client CPU of one tick; whether it read recorded series."""
    from infertop.collectors.sources.prom import PromSource
    from infertop.layouts.model import PrometheusConfig

    config = PrometheusConfig(url=url, backfill_s=0, gpu_detail_every=1 if full else 1000, timeout_s=60,
                              node_label=node_label)
    names = [f"node-{n:04d}" for n in range(nodes)]
    walls, cpus, recorded = [], [], False
    for i in range(rounds + 1):
        source = PromSource(config, names, SCRAPE_S)  # fresh: every node's samples built
        source._ticks = 0 if full else 1  # 1: a tick between two per-GPU refreshes
        try:
            # which recorded series exist: asked once a few minutes by a running source,
            # not each tick, so not timed here
            await source._look_for_recorded(source.clock())
            wall0, cpu0 = time.perf_counter(), time.process_time()
            samples = await source.poll()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            recorded = any(q.promql.startswith("infertop_node:") for q in source.queries("engine"))
        finally:
            await source.close()
        bad = [s for s in samples if not s.ok]
        if bad or len({s.node for s in samples}) < nodes:
            raise RuntimeError(f"{len(bad)} error samples, {len({s.node for s in samples})} nodes")
        if i:  # the first round warms connections and the backend's caches
            walls.append(wall)
            cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus), recorded


def _rows(label: str, nodes: int, tick: str, wall: float, cpu: float, load: float) -> list[Row]:
    judged = nodes >= 4096 and "rules" in label
    target = f"< {TARGET_S:g} s at 4,096 with rules" if judged else "info"
    verdict = ("met" if wall < TARGET_S else f"missed by {wall - TARGET_S:.2f} s") if judged else "info"
    return [Row(f"prom tick, {nodes:,} nodes / {nodes * GPUS:,} GPUs, {label}, {tick}: wall / client CPU",
                f"{wall:.2f} s / {cpu:.2f} s (load {load:.1f})", target, verdict, COMMAND)]


def _both_ticks(url: str, nodes: int, label: str, node_label: str | list[str]) -> list[Row]:
    rows: list[Row] = []
    for full, tick in ((True, "full tick (with per-GPU)"), (False, "engine + node tick")):
        load = os.getloadavg()[0]
        wall, cpu, recorded = asyncio.run(measure(url, nodes, node_label, full))
        if "rules" in label and not recorded:
            raise RuntimeError(f"{label}: the recorded series were not read")
        rows += _rows(label, nodes, tick, wall, cpu, load)
    return rows


def _history_ready(count: Callable[[str], int], nodes: int) -> Callable[[], bool]:
    # two scrapes of every node's counters: a rate exists for each
    return lambda: count("rate(vllm:generation_tokens_total[1m])") >= nodes


def _how_the_backend_fares(server: object) -> str:
    """Why a backend could not get there: its last scrape's duration, and (Prometheus)
    how long its slowest rule group took to evaluate, against the scrape interval."""
    import json
    import urllib.request

    said = []
    try:
        scrape = server.query("max(scrape_duration_seconds)")  # type: ignore[attr-defined]
        if scrape:
            said.append(f"last scrape took {float(scrape[0]['value'][1]):.1f} s")
        with urllib.request.urlopen(f"{server.url}/api/v1/rules", timeout=10) as resp:  # type: ignore[attr-defined]
            groups = json.load(resp)["data"]["groups"]
        if groups:
            said.append(f"slowest rule group took {max(g.get('evaluationTime', 0) for g in groups):.1f} s to evaluate")
    except Exception:  # VictoriaMetrics has no rules page; a backend too busy to answer says enough
        pass
    return ", ".join(said) + f" (every {SCRAPE_S:g} s)" if said else "the backend did not answer"


@contextmanager
def _backend(kind: str, tmp: Path, target: object, rules: bool, nodes: int) -> Iterator[str]:
    from tests.support.metrics_backend import wait_until
    from tests.support.prometheus_server import PrometheusServer
    from tests.support.victoria_server import VictoriaMetricsServer

    server: PrometheusServer | VictoriaMetricsServer
    if kind == "prometheus":
        server = PrometheusServer(tmp, [target], scrape_interval=f"{SCRAPE_S:g}s",  # type: ignore[list-item]
                                  honor_labels=True, rule_files=[RULES] if rules else [])
    else:
        server = VictoriaMetricsServer(tmp, [target], scrape_interval=f"{SCRAPE_S:g}s",  # type: ignore[list-item]
                                       honor_labels=True, latency_offset="2s", rule_files=[RULES] if rules else [],
                                       max_scrape_size="512MB")
    try:
        server.start(timeout_s=60)
        ingest = max(120.0, nodes / 10)
        try:
            server.wait_for_series("DCGM_FI_DEV_GPU_UTIL", nodes * GPUS, timeout_s=ingest)
            wait_until(_history_ready(server.series_count, nodes), ingest, "a rate for every node", every_s=1.0)
        except AssertionError as exc:
            raise RuntimeError(f"{exc}; {_how_the_backend_fares(server)}") from exc
        if rules:
            # two evaluations: a round reads the tiers as of the newest scrape, which the
            # first evaluation (stamped after that scrape) does not cover yet
            wait_until(lambda: all(server.series_count(f"count_over_time(infertop_node:{name}[1m]) >= 2") >= nodes
                                   for name in ("engine_generation_tokens_total", "gpu_util_pct", "node_eth_rx")),
                       ingest, "two evaluations of every node's recorded series", every_s=1.0)
        yield server.url
    except AssertionError as exc:
        raise RuntimeError(f"{exc}; {_how_the_backend_fares(server)}") from exc
    finally:
        server.stop()


def _one_size(nodes: int) -> list[Row]:
    from tests.support.prometheus_server import Target, prometheus_available
    from tests.support.victoria_server import victoria_available, vmalert_available

    available = {"prometheus": prometheus_available(), "victoriametrics": victoria_available()}
    names = {"prometheus": "Prometheus", "victoriametrics": "VictoriaMetrics"}
    rows: list[Row] = []
    page = Page(nodes, time.time() - 1000)
    exporter = serve(page)
    target = Target(f"127.0.0.1:{exporter.server_address[1]}")
    try:
        for kind in BACKENDS:
            if not available.get(kind):
                continue
            for rules in (False, True):
                if ("rules" if rules else "raw") not in SERIES:
                    continue
                if rules and kind == "victoriametrics" and not vmalert_available():
                    continue
                label = f"{names[kind]}, {'recording rules' if rules else 'raw series'}"
                try:
                    with tempfile.TemporaryDirectory() as tmp, _backend(kind, Path(tmp), target, rules, nodes) as url:
                        # the recorded series are read where node_label is the rules' own
                        got = _both_ticks(url, nodes, label, ["node", "instance"] if rules else "instance")
                except (RuntimeError, AssertionError, TimeoutError) as exc:  # e.g. cannot ingest that many here
                    got = [Row(f"prom tick, {nodes:,} nodes, {label}",
                               f"not measured: {str(exc)[:200]} (load {os.getloadavg()[0]:.1f})", "info", "info", COMMAND)]
                for row in got:  # as they come: a long run's figures are not lost with it
                    print(f"   {row.figure}: {row.value} ({row.verdict})", file=sys.stderr, flush=True)
                rows += got
    finally:
        exporter.shutdown()
    return rows


def run() -> list[Row]:
    rows: list[Row] = []
    for nodes in SIZES:
        rows += _one_size(nodes)
    if not rows:
        rows.append(Row("prom tick at scale", "skipped: neither prometheus nor victoria-metrics installed",
                        "info", "info", COMMAND))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})", flush=True)
