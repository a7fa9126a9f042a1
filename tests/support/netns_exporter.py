"""An exporter page served from inside a test host's network namespace (or on loopback),
one per process so that a test can kill one page of a node and keep the others.

    python netns_exporter.py node ADDRESS PORT PORT_FILE    # node_exporter's netdev/netclass
    python netns_exporter.py dcgm ADDRESS PORT PORT_FILE    # dcgm-exporter's GPU gauges

`node` reads the namespace's own /sys/class/net on every scrape (`ip netns exec` mounts the
namespace's sysfs), so its counters, error counters and link states are the host's real
ones, under node_exporter's names and labels. `dcgm` serves two GPUs as dcgm-exporter does
with the recommended counters (clock-event reasons, ECC, NVLink) collected: a node fully
seen until a page dies. Built with prometheus_client; writes PORT_FILE once it
listens (tests/port_file_process.py waits for it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

SYS_NET = Path("/sys/class/net")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # e.g. `speed` of a virtual link: EINVAL
        return None


class NetClassCollector(Collector):
    """node_exporter's netdev + netclass families from this namespace's sysfs."""

    def collect(self) -> Iterable[Any]:
        rx = CounterMetricFamily("node_network_receive_bytes", "Network device statistic receive_bytes.",
                                 labels=["device"])
        tx = CounterMetricFamily("node_network_transmit_bytes", "Network device statistic transmit_bytes.",
                                 labels=["device"])
        up = GaugeMetricFamily("node_network_up", "Value is 1 if operstate is 'up', 0 otherwise.",
                               labels=["device"])
        info = GaugeMetricFamily("node_network_info", "Non-numeric data from /sys/class/net/<iface>.",
                                 labels=["address", "device", "operstate"])
        speed = GaugeMetricFamily("node_network_speed_bytes", "speed_bytes value of /sys/class/net/<iface>.",
                                  labels=["device"])
        errors = {
            stat: CounterMetricFamily(f"node_network_{name}", f"Network device statistic {name}.",
                                      labels=["device"])
            for stat, name in (("rx_errors", "receive_errs"), ("tx_errors", "transmit_errs"),
                               ("rx_dropped", "receive_drop"), ("tx_dropped", "transmit_drop"))
        }
        for dev in sorted(os.listdir(SYS_NET)):
            base = SYS_NET / dev
            rx.add_metric([dev], float(_read(base / "statistics" / "rx_bytes") or 0))
            for stat, fam in errors.items():
                fam.add_metric([dev], float(_read(base / "statistics" / stat) or 0))
            tx.add_metric([dev], float(_read(base / "statistics" / "tx_bytes") or 0))
            operstate = _read(base / "operstate") or "unknown"
            up.add_metric([dev], 1.0 if operstate == "up" else 0.0)
            info.add_metric([_read(base / "address") or "", dev, operstate], 1.0)
            mbps = _read(base / "speed")
            if mbps is not None and mbps.lstrip("-").isdigit() and int(mbps) > 0:
                speed.add_metric([dev], int(mbps) * 1e6 / 8)
        yield from (rx, tx, up, info, speed, *errors.values())


class DcgmCollector(Collector):
    def collect(self) -> Iterable[Any]:
        labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
        values = {
            "DCGM_FI_DEV_GPU_UTIL": 80.0,
            "DCGM_FI_DEV_POWER_USAGE": 500.0,
            "DCGM_FI_DEV_FB_USED": 70000.0,
            "DCGM_FI_DEV_FB_FREE": 11000.0,
            "DCGM_FI_DEV_GPU_TEMP": 60.0,
            "DCGM_FI_DEV_SM_CLOCK": 1980.0,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0.0,
            "DCGM_FI_DEV_XID_ERRORS": 0.0,
            # the rest of the recommended counters (docs/dcgm-counters.csv): nothing unseen
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0,
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 0.0,
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 0.0,
        }
        for name, value in values.items():
            fam = GaugeMetricFamily(name, name, labels=labels)
            for i in range(2):
                fam.add_metric([str(i), f"GPU-netns-{i}", f"nvidia{i}", "NVIDIA H200", "netns"], value)
            yield fam


def serve(registry: CollectorRegistry, address: str, port: int, port_file: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer((address, port), Handler)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.replace(port_file)  # whole, never half-written
    server.serve_forever()


def main(argv: list[str]) -> int:
    kind, address, port, port_file = argv
    registry = CollectorRegistry()
    registry.register(NetClassCollector() if kind == "node" else DcgmCollector())
    serve(registry, address, int(port), Path(port_file))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
