"""`infertop demo --via prometheus|victoriametrics`: the simulated cluster read the way a
large deployment reads it, through a real metrics backend from the system package.

The served cluster answers Prometheus' HTTP service discovery on each endpoint's
`/targets` (infertop/demo/server.py): the backend scrapes every node's three pages from
three `http_sd_configs`, the `node` and `role` labels attached there, and the monitor
reads it all through the prom source (node_label = "node"). Prometheus also loads the
shipped rules (collectors/sources/prom_rules.py, written into the backend's folder).

Past a few hundred nodes one machine holds the simulated cluster, the backend and the
monitor only at a slower pace: `via_plan` says which (docs/large-clusters.md has the
measurements it comes from), and the written layout says it in a comment.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infertop.collectors.sources.prom_rules import rules_yaml
from infertop.demo.node_collectors import INFERTOP_COLLECTORS

# the layout's interval and the backend's scrape interval: a backend holding 3 pages of
# each of 1,024 nodes is not scraped every second
VIA_INTERVAL_S = 2.0
# up to this many nodes the demo through a backend serves real-size pages every 2 s; up to
# VIA_SMALL_PAGES_NODES small pages every 5 s; past it every 10 s without the rules
VIA_FULL_PACE_NODES = 32
VIA_SMALL_PAGES_NODES = 256


@dataclass(frozen=True)
class ViaPlan:
    """How the demo through a backend runs for its size, on one machine."""

    interval_s: float  # the backend's scrape and rule interval, and the layout's
    window_s: float  # the layout's window: room for the latency histograms' readings
    timeout_s: float  # the layout's [prometheus] timeout_s: one round of queries
    pages: str  # the served pages' size, when --pages was not given
    rules: bool  # whether the backend evaluates infertop's recording rules
    why: str  # said in the layout's comment; empty at full pace


def via_plan(nodes: int, via: str) -> ViaPlan:
    """The pace of `demo --via` for `nodes`, from what 2 cores held (docs/large-clusters.md).
    A real-size node is ~4,700 series (8 data-parallel engines' histograms, dcgm-exporter's
    default counters, a host's interfaces), a small one ~340: one machine running the
    cluster, the backend and the monitor ingests real-size pages every 2 s for a few dozen
    nodes (at 256, every node went unreachable), small ones every 5 s for a few hundred;
    at 1,024 the recording rules' evaluation alone took 10.6 s of CPU a 5 s cycle and a
    round of queries 4–8 s, so: every 10 s, no rules."""
    rules = via == "prometheus"
    if nodes <= VIA_FULL_PACE_NODES:
        return ViaPlan(VIA_INTERVAL_S, 10.0, 5.0, "realistic", rules, "")
    why = f"{nodes} nodes, the simulated cluster, {via} and the monitor on one machine: small pages"
    if nodes <= VIA_SMALL_PAGES_NODES:
        return ViaPlan(5.0, 20.0, 5.0, "small", rules, f"{why}, read every 5 s (docs/large-clusters.md)")
    return ViaPlan(10.0, 30.0, 10.0, "small", False,
                   f"{why}, read every 10 s, no recording rules (docs/large-clusters.md)")


def write_rules(path: Path) -> Path:
    """infertop's rules (collectors/sources/prom_rules.py) where the backend reads them."""
    path.write_text(rules_yaml(), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Backend:
    via: str  # the --via spelling
    binary: str  # the command the system package installs
    package: str  # the Debian package that has it
    ready_path: str  # answers 200 once queries can be served


BACKENDS = {
    "prometheus": Backend("prometheus", "prometheus", "prometheus", "/-/ready"),
    "victoriametrics": Backend("victoriametrics", "victoria-metrics", "victoria-metrics", "/health"),
}


class BackendMissing(Exception):
    """The backend's binary is not installed: the message names the package."""


def backend_binary(via: str) -> str:
    backend = BACKENDS[via]
    found = shutil.which(backend.binary)
    if found is None:
        raise BackendMissing(
            f"infertop demo --via {via}: `{backend.binary}` is not installed "
            f"(Debian package {backend.package}: sudo apt-get install {backend.package})"
        )
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def scrape_config(
    host: str, ports: dict[str, int], interval_s: float, rules: Path | None = None
) -> dict[str, Any]:
    """A Prometheus configuration (VictoriaMetrics reads the same `scrape_configs`):
    each endpoint type found from its `/targets`; node_exporter asked only for the
    collectors infertop reads, as the direct layout asks."""
    every = f"{interval_s:g}s"
    jobs = []
    for kind, port in ports.items():
        job: dict[str, Any] = {
            "job_name": f"infertop-demo-{kind}",
            "http_sd_configs": [{"url": f"http://{host}:{port}/targets"}],
        }
        if kind == "node":
            job["params"] = {"collect[]": list(INFERTOP_COLLECTORS)}
        jobs.append(job)
    config: dict[str, Any] = {
        "global": {"scrape_interval": every, "scrape_timeout": every},
        "scrape_configs": jobs,
    }
    if rules is not None:  # Prometheus only: VictoriaMetrics refuses fields it does not know
        config["global"]["evaluation_interval"] = every
        config["rule_files"] = [str(rules)]
    return config


def write_scrape_config(path: Path, config: dict[str, Any]) -> None:
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML


def backend_argv(via: str, binary: str, config: Path, data: Path, listen: str) -> list[str]:
    if via == "prometheus":
        return [binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
                f"--web.listen-address={listen}", "--storage.tsdb.retention.time=1h", "--log.level=warn"]
    return [binary, f"-promscrape.config={config}", f"-storageDataPath={data}",
            f"-httpListenAddr={listen}", "-retentionPeriod=1d", "-loggerLevel=WARN"]


def start_backend(via: str, config: Path, workdir: Path, host: str, port: int,
                  timeout_s: float = 60.0) -> subprocess.Popen[bytes]:
    """The backend on `host:port`, its data and log in `workdir`; returns once it serves
    queries. Raises BackendMissing, or RuntimeError (with its log's last line) when it
    exits or does not come up."""
    binary = backend_binary(via)
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{via}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(backend_argv(via, binary, config, data, f"{host}:{port}"),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    url = f"http://{host}:{port}{BACKENDS[via].ready_path}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            lines = log_path.read_text(errors="replace").strip().splitlines() or [""]
            raise RuntimeError(f"infertop demo: {via} exited ({proc.returncode}): {lines[-1][:300]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"infertop demo: {via} did not come up within {timeout_s:g} s (log: {log_path})")
