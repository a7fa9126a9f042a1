"""The one way tests and benchmarks start a real metrics backend (Prometheus,
VictoriaMetrics, vmalert): a child process on a free loopback port (kept across
restarts), its config and data in a work folder, its log kept for the error message,
ready when its health page answers, and asked with the Prometheus query API."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.waiting import until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    """`until` with a server's habits: an error while asking means "not yet"."""
    return until(check, timeout_s, what, every_s=every_s, ignore=(Exception,))


@dataclass
class Target:
    """One scrape target: its address and the labels the backend should attach."""

    address: str
    labels: dict[str, str] = field(default_factory=dict)


def scrape_config(targets: Sequence[Target], interval: str, honor_labels: bool, jobs: int = 1) -> dict[str, Any]:
    """The scrape part both Prometheus and VictoriaMetrics read (JSON is YAML). `jobs` > 1:
    as many jobs scraping the same targets (an overlapping job: every series twice)."""
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [{
            "job_name": "infertop-test" + (f"-{j}" if j else ""),
            "honor_labels": honor_labels,
            "static_configs": [{"targets": [t.address], "labels": t.labels} for t in targets],
        } for j in range(jobs)],
    }


class BackendProcess(ABC):
    """One backend child process. Subclasses say its name, command line and health page."""

    name = "backend"
    health_path = "/-/ready"

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{self.name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @abstractmethod
    def command(self) -> list[str]:
        """The backend's command line (each backend its own)."""

    def start(self, timeout_s: float = 30.0) -> None:
        command = self.command()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(command, stdout=log, stderr=log)
        log.close()
        wait_until(self._ready, timeout_s, f"{self.name} {self.health_path}")

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.name} exited {self.proc.returncode}: {tail}")
        with urllib.request.urlopen(f"{self.url}{self.health_path}", timeout=2) as resp:
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

    def series_count(self, promql: str) -> int:
        """How many series `promql` answers, counted by the backend: one number back, not
        every series (32k GPU series take longer than the query's timeout to send here)."""
        result = self.query(f"count({promql})")
        return int(float(result[0]["value"][1])) if result else 0

    def wait_for_series(self, promql: str, count: int, timeout_s: float = 30.0) -> None:
        wait_until(lambda: self.series_count(promql) >= count, timeout_s, f"{count} series of {promql}")


class ScrapingBackend(BackendProcess):
    """A backend that scrapes `targets` itself (Prometheus, VictoriaMetrics)."""

    def __init__(self, workdir: Path, targets: Sequence[Target], scrape_interval: str, honor_labels: bool):
        super().__init__(workdir)
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.honor_labels = honor_labels
        self.jobs = 1  # more: overlapping jobs scraping the same targets

    def scrape_config(self) -> dict[str, Any]:
        return scrape_config(self.targets, self.scrape_interval, self.honor_labels, self.jobs)
