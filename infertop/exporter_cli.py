"""`infertop export --layout FILE --listen 127.0.0.1:9464`: the monitor, headless, as an exporter.

Runs the same Monitor as the TUI and serves its latest Snapshot in Prometheus text on
`/metrics` (prometheus_client's threaded server), so dashboards and alerting rules can
use infertop's derived figures. A bad or busy `--listen` is bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from infertop.cli import EXIT_OK, SUBCOMMANDS, UsageError, _layout_or_local, add_layout_arg
from infertop.exporter import SnapshotCollector
from infertop.runtime import Monitor
from infertop.stopping import Stop, run_stoppable
from layouts.model import Layout

DEFAULT_LISTEN = "127.0.0.1:9464"


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `[V6]:PORT` → (host, port); UsageError with one line otherwise."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise UsageError(f"infertop export: --listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise UsageError(f"infertop export: --listen {text!r}: port must be 1-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UsageError(f"infertop export: --listen {text!r}: {host!r} is not an IPv6 address") from None
    return host, port


def start_server(monitor: Monitor, host: str, port: int) -> WSGIServer:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: monitor.latest))
    try:
        server, _thread = start_http_server(port, host, registry)
    except OSError as exc:
        raise UsageError(
            f"infertop export: --listen {host}:{port}: {exc.strerror or exc}"
        ) from None
    return server


async def serve(layout: Layout, host: str, port: int, stop: Stop) -> int:
    monitor = Monitor(layout)
    # bind before collecting: a bad address fails at once, before any connection is made
    server = start_server(monitor, host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"infertop export: serving http://{shown}:{port}/metrics", file=sys.stderr, flush=True)
    await monitor.start()
    try:
        await stop.wait()
    finally:
        await monitor.stop()
        server.shutdown()
        server.server_close()
    return EXIT_OK


def _add_export(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    p.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
        help=f"address of the /metrics endpoint (default {DEFAULT_LISTEN})",
    )


def cmd_export(args: argparse.Namespace) -> int:
    host, port = parse_listen(args.listen)
    layout = _layout_or_local(getattr(args, "layout", None))
    stop = Stop()
    return run_stoppable(serve(layout, host, port, stop), stop)


SUBCOMMANDS["export"] = (
    "serve infertop's derived figures as Prometheus metrics (headless)",
    _add_export,
    cmd_export,
)
