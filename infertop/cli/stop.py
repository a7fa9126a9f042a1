"""`infertop stop [--layout F]`: stop the monitor running for a layout; its record closes.

Returns once the monitor has closed the record and hung up (or says it did not in time).
"""

from __future__ import annotations

import argparse
import sys

from infertop.cli.common import EXIT_FAIL, EXIT_OK, add_layout_arg, layout_of, say
from infertop.monitor.channel.client import Connection, MonitorUnavailable
from infertop.monitor.channel.paths import socket_path
from infertop.monitor.channel.protocol import Reply, StopMonitor

NAME = "stop"
HELP = "stop the monitor running for a layout (its session record closes)"
STOP_WAIT_S = 15.0  # the monitor's own stop is bounded (collectors/process/stopping.py); this is slack


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)


def run(args: argparse.Namespace) -> int:
    layout = layout_of(args)
    socket = socket_path(layout)
    try:
        with Connection(socket) as conn:
            info = conn.info
            reply = conn.request(StopMonitor())
            if not isinstance(reply, Reply) or not reply.ok:
                say(f"infertop: the monitor (pid {info.pid}) refused to stop")
                return EXIT_FAIL
            if not conn.wait_hangup(STOP_WAIT_S):
                say(f"infertop: the monitor (pid {info.pid}) is still stopping after {STOP_WAIT_S:g} s")
                return EXIT_FAIL
    except MonitorUnavailable as exc:
        say(f"infertop: {exc}")
        return EXIT_FAIL
    record = f"; session record {info.record} closed" if info.record else ""
    say(f"infertop: stopped the monitor (pid {info.pid}){record}", sys.stdout)
    return EXIT_OK
