"""A real VictoriaMetrics (Debian's /usr/bin/victoria-metrics) for tests: single-node,
scraping the given targets itself (-promscrape.config), on a free loopback port, its data
in a temporary folder. It answers the Prometheus query API, `latency_offset` in the past
for queries near "now" (-search.latencyOffset, 30 s by default).

With `rule_files`, a vmalert (the same package) evaluates them against it and writes the
recorded series back into it (remote write), as a VictoriaMetrics user runs rules."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.support.metrics_backend import BackendProcess, ScrapingBackend, Target, free_port, scrape_config

VICTORIA_BIN = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
VMALERT_BIN = shutil.which("vmalert") or "/usr/bin/vmalert"


def victoria_available() -> bool:
    return Path(VICTORIA_BIN).exists()


def vmalert_available() -> bool:
    return Path(VMALERT_BIN).exists()


class VmAlert(BackendProcess):
    """vmalert: the rules evaluated against `datasource`, results written back into it."""

    name = "vmalert"
    health_path = "/health"

    def __init__(self, workdir: Path, datasource: str, rule_files: Sequence[Path], interval: str):
        super().__init__(workdir)
        self.datasource = datasource
        self.rule_files = list(rule_files)
        self.interval = interval

    def command(self) -> list[str]:
        return [
            VMALERT_BIN,
            *(f"-rule={f}" for f in self.rule_files),
            f"-datasource.url={self.datasource}",
            f"-remoteWrite.url={self.datasource}",
            f"-evaluationInterval={self.interval}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            # alerts go nowhere (no -notifier.blackhole in Debian's 1.79): delivering them
            # is the Alertmanager test's job (test_alertmanager.py)
            f"-notifier.url=http://127.0.0.1:{free_port()}",
            "-loggerLevel=WARN",
        ]


VMAGENT_BIN = shutil.which("vmagent") or "/usr/bin/vmagent"


def vmagent_available() -> bool:
    return Path(VMAGENT_BIN).exists()


class VmAgent(BackendProcess):
    """vmagent scraping `targets` into `write_to` (remote write). `member` (i, n): one of n
    vmagents in cluster mode, each scraping its share of the targets."""

    name = "vmagent"
    health_path = "/health"

    def __init__(self, workdir: Path, targets: Sequence[Target], write_to: str,
                 member: tuple[int, int] | None = None, scrape_interval: str = "1s"):
        super().__init__(workdir)
        self.name = f"vmagent-{member[0] if member else 0}"
        self.log_path = workdir / f"{self.name}.log"
        self.targets = list(targets)
        self.write_to = write_to
        self.member = member
        self.scrape_interval = scrape_interval

    def command(self) -> list[str]:
        config = self.workdir / f"{self.name}.yml"
        config.write_text(json.dumps(scrape_config(self.targets, self.scrape_interval, False), indent=2))
        cluster = [] if self.member is None else [
            f"-promscrape.cluster.membersCount={self.member[1]}", f"-promscrape.cluster.memberNum={self.member[0]}",
        ]
        return [
            VMAGENT_BIN,
            f"-promscrape.config={config}",
            *cluster,
            f"-remoteWrite.url={self.write_to}/api/v1/write",
            f"-remoteWrite.tmpDataPath={self.workdir / (self.name + '-buffer')}",
            "-remoteWrite.flushInterval=200ms",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-loggerLevel=WARN",
        ]


    def active_targets(self) -> list[dict[str, object]]:
        """The targets this member scrapes (its /api/v1/targets)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as resp:
            targets: list[dict[str, object]] = json.load(resp)["data"]["activeTargets"]
        return targets


class VictoriaMetricsServer(ScrapingBackend):
    name = "victoria-metrics"
    health_path = "/health"

    def __init__(
        self,
        workdir: Path,
        targets: Sequence[Target] = (),
        scrape_interval: str = "1s",
        honor_labels: bool = False,
        latency_offset: str = "30s",
        rule_files: Sequence[Path] = (),
        max_scrape_size: str = "16MB",  # VictoriaMetrics' default: a 4,096-node page is ~40 MB
    ):
        super().__init__(workdir, targets, scrape_interval, honor_labels)
        self.max_scrape_size = max_scrape_size
        self.latency_offset = latency_offset
        self.vmalert = VmAlert(workdir, self.url, rule_files, scrape_interval) if rule_files else None

    def write_config(self) -> Path:
        path = self.workdir / "scrape.yml"
        path.write_text(json.dumps(self.scrape_config(), indent=2))
        return path

    def command(self) -> list[str]:
        return [
            VICTORIA_BIN,
            f"-promscrape.config={self.write_config()}",
            f"-storageDataPath={self.workdir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            f"-search.latencyOffset={self.latency_offset}",
            f"-promscrape.maxScrapeSize={self.max_scrape_size}",
            "-retentionPeriod=1d",
            "-loggerLevel=WARN",
        ]

    def start(self, timeout_s: float = 30.0) -> None:
        super().start(timeout_s)
        if self.vmalert is not None:
            self.vmalert.start(timeout_s)

    def stop(self) -> None:
        if self.vmalert is not None:
            self.vmalert.stop()
        super().stop()

    def wait_for_series(self, promql: str, count: int, timeout_s: float = 60.0) -> None:
        super().wait_for_series(promql, count, timeout_s)
