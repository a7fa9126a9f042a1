"""One of the shipped alert rules (docs/prometheus/infertop-rules.yml) delivered end to
end: the real `infertop export` serves a session past its budget, a real Prometheus
scrapes it and evaluates the shipped rules, a real Alertmanager (Debian's
prometheus-alertmanager) routes the alert to a webhook receiver on loopback."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import infertop_bin
from tests.support.prometheus_server import (
    PrometheusServer,
    Target,
    free_port,
    prometheus_available,
    wait_until,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not prometheus_available(), reason="Debian package prometheus not installed"),
    pytest.mark.skipif(shutil.which("prometheus-alertmanager") is None,
                       reason="Debian package prometheus-alertmanager not installed"),
]

RULES = Path(__file__).resolve().parents[2] / "docs" / "prometheus" / "infertop-rules.yml"


def webhook_receiver() -> tuple[ThreadingHTTPServer, list[dict[str, Any]]]:
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


def start_alertmanager(workdir: Path, hook_url: str) -> tuple[subprocess.Popen[bytes], int]:
    config = {
        "route": {"receiver": "hook", "group_by": ["alertname"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": hook_url}]}],
    }
    (workdir / "alertmanager.yml").write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    log = (workdir / "alertmanager.log").open("ab")
    proc = subprocess.Popen(
        ["prometheus-alertmanager", f"--config.file={workdir / 'alertmanager.yml'}",
         f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--cluster.listen-address=", "--log.level=warn"],
        stdout=log, stderr=log,
    )
    log.close()
    return proc, port


def test_spend_past_budget_reaches_the_webhook(tmp_path: Path) -> None:
    started = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    layout = tmp_path / "budget.toml"
    layout.write_text(
        '[cluster]\nname = "budget-alert"\ninterval_s = 0.5\n\n'
        f'[session]\nreservation_start = "{started.strftime("%Y-%m-%dT%H:%M:%SZ")}"\nbudget_usd = 1.0\n\n'
        '[pricing]\nnode_hour_usd = 36.0\n\n[[nodes]]\nname = "here"\nlocal = true\n'
    )
    hook, received = webhook_receiver()
    am, am_port = start_alertmanager(tmp_path, f"http://127.0.0.1:{hook.server_address[1]}/hook")
    export_port = free_port()
    exporter = subprocess.Popen(
        [infertop_bin(), "export", "--layout", str(layout), "--listen", f"127.0.0.1:{export_port}"],
        stderr=subprocess.DEVNULL,
    )
    prom = PrometheusServer(tmp_path, [Target(f"127.0.0.1:{export_port}")], rule_files=[RULES],
                            alertmanagers=[f"127.0.0.1:{am_port}"])
    try:
        prom.start()
        # 2 h at $36/h against $1: past the budget from the first snapshot on
        wait_until(lambda: prom.query("infertop_session_budget_used_ratio >= 1"), 40, "the budget passed")
        wait_until(lambda: any(a["labels"]["alertname"] == "InfertopSpendPastBudget"
                               for msg in received for a in msg["alerts"]), 60, "the alert at the webhook")
    finally:
        prom.stop()
        exporter.send_signal(signal.SIGTERM)
        exporter.wait(15)
        am.terminate()
        am.wait(10)
        hook.shutdown()
    alert = next(a for msg in received for a in msg["alerts"] if a["labels"]["alertname"] == "InfertopSpendPastBudget")
    assert alert["status"] == "firing"
    assert alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["summary"] == "the reservation's spend is past its budget"
