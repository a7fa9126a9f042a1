"""A real VictoriaMetrics (Debian's /usr/bin/victoria-metrics) for tests: single-node,
scraping the given targets itself (-promscrape.config), on a free loopback port, its data
in a temporary folder. It answers the Prometheus query API, `latency_offset` in the past
for queries near "now" (-search.latencyOffset, 30 s by default)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.prometheus_server import Target, free_port, wait_until

VICTORIA_BIN = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"


def victoria_available() -> bool:
    return Path(VICTORIA_BIN).exists()


class VictoriaMetricsServer:
    def __init__(
        self,
        workdir: Path,
        targets: Sequence[Target] = (),
        scrape_interval: str = "1s",
        honor_labels: bool = False,
        latency_offset: str = "30s",
    ):
        self.workdir = workdir
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.honor_labels = honor_labels
        self.latency_offset = latency_offset
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "victoria-metrics.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_config(self) -> Path:
        config = {
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval},
            "scrape_configs": [{
                "job_name": "infertop-test",
                "honor_labels": self.honor_labels,
                "static_configs": [{"targets": [t.address], "labels": t.labels} for t in self.targets],
            }],
        }
        path = self.workdir / "scrape.yml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        return path

    def start(self, timeout_s: float = 30.0) -> None:
        config = self.write_config()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                VICTORIA_BIN,
                f"-promscrape.config={config}",
                f"-storageDataPath={self.workdir / 'data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                f"-search.latencyOffset={self.latency_offset}",
                "-retentionPeriod=1d",
                "-loggerLevel=WARN",
            ],
            stdout=log,
            stderr=log,
        )
        log.close()
        wait_until(self._ready, timeout_s, "victoria-metrics /health")

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"victoria-metrics exited {self.proc.returncode}: {tail}")
        with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
            return bool(resp.status == 200)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def query(self, promql: str) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as resp:
            body = json.load(resp)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for_series(self, promql: str, count: int, timeout_s: float = 60.0) -> None:
        wait_until(lambda: len(self.query(promql)) >= count, timeout_s, f"{count} series of {promql}")
