"""`infertop export --layout FILE --listen 127.0.0.1:9464`: the monitor, headless, as an exporter.

Runs the same Monitor as the TUI and serves its latest Snapshot in Prometheus text on
`/metrics` (monitor/exporter_http.py), so dashboards and alerting rules can use infertop's
derived figures. A bad or busy `--listen` is bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import ipaddress

from infertop.cli.common import EXIT_OK, UsageError, add_layout_arg, layout_of, say
from infertop.collectors.process.stopping import Stop, run_stoppable
from infertop.collectors.safe_text import whole_number
from infertop.layouts.model import Layout

NAME = "export"
HELP = "serve infertop's derived figures as Prometheus metrics (headless)"
DEFAULT_LISTEN = "127.0.0.1:9464"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    p.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
        help=f"address of the /metrics endpoint (default {DEFAULT_LISTEN})",
    )


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `[V6]:PORT` → (host, port); UsageError with one line otherwise."""
    host, sep, port_text = text.rpartition(":")
    port = whole_number(port_text)
    if not sep or not host or port is None:
        raise UsageError(f"infertop export: --listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    if not 0 < port < 65536:
        raise UsageError(f"infertop export: --listen {text!r}: port must be 1-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UsageError(f"infertop export: --listen {text!r}: {host!r} is not an IPv6 address") from None
    return host, port


async def serve(layout: Layout, host: str, port: int, stop: Stop) -> int:
    from infertop.monitor.exporter_http import start_server  # the collectors load for this command only
    from infertop.monitor.monitor import Monitor

    monitor = Monitor(layout)
    # bind before collecting: a bad address fails at once, before any connection is made
    try:
        server = start_server(monitor, host, port)
    except OSError as exc:
        raise UsageError(f"infertop export: --listen {host}:{port}: {exc.strerror or exc}") from None
    shown = f"[{host}]" if ":" in host else host
    say(f"infertop export: serving http://{shown}:{port}/metrics")
    await monitor.start()
    try:
        await stop.wait()
    finally:
        await monitor.stop()
        server.shutdown()
        server.server_close()
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    host, port = parse_listen(args.listen)
    layout = layout_of(args)
    stop = Stop()
    return run_stoppable(serve(layout, host, port, stop), stop)
