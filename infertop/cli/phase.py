"""`infertop phase NAME`: mark the running session's phase, from any terminal.

With a monitor running for the layout the mark goes to it over its socket and is applied
at once (every viewer's next frame shows it). With none running it goes into the session
record, for the monitor that resumes it to apply (`--record FILE` names another record).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from infertop.cli.common import EXIT_OK, add_layout_arg, add_record_args, fail, layout_of, say
from infertop.cli.monitors import running_monitor
from infertop.monitor.channel.client import MonitorUnavailable, call
from infertop.monitor.channel.paths import socket_path
from infertop.monitor.channel.protocol import MarkPhase, Reply
from infertop.monitor.evaluation.ledger import PHASES
from infertop.monitor.record.store import RecordError, add_phase_mark, default_record_path

NAME = "phase"
HELP = "mark the running session's phase (build, load, warmup, run, failed, idle)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", choices=PHASES, help="the phase spend is attributed to from now on")
    add_layout_arg(p, interval=False)
    add_record_args(p)


def run(args: argparse.Namespace) -> int:
    layout = layout_of(args)
    path = getattr(args, "record", None)
    target = Path(path) if path else default_record_path(layout)
    info = running_monitor(layout)
    if info is not None and (path is None or info.record == str(target.resolve())):
        try:
            reply = call(socket_path(layout), MarkPhase(phase=args.name))
        except MonitorUnavailable as exc:
            return fail(str(exc))
        if not isinstance(reply, Reply) or not reply.ok:
            return fail(f"the monitor (pid {info.pid}) refused the mark: "
                        f"{reply.detail if isinstance(reply, Reply) else 'no reply'}")
        say(f"phase {args.name} marked by the running monitor (pid {info.pid})", sys.stdout)
        return EXIT_OK
    try:
        add_phase_mark(target, args.name, time.time())
    except RecordError as exc:
        return fail(str(exc))
    say(f"phase {args.name} marked in {target} (applied at the session's next tick)", sys.stdout)
    return EXIT_OK
