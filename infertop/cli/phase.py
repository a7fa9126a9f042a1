"""`infertop phase NAME`: mark the running session's phase, from any terminal."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from infertop.cli.common import EXIT_OK, add_layout_arg, add_record_args, fail, layout_of, say
from monitor.evaluation.ledger import PHASES
from monitor.record.store import RecordError, add_phase_mark, default_record_path

NAME = "phase"
HELP = "mark the running session's phase (build, load, warmup, run, failed, idle)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", choices=PHASES, help="the phase spend is attributed to from now on")
    add_layout_arg(p, interval=False)
    add_record_args(p)


def run(args: argparse.Namespace) -> int:
    path = getattr(args, "record", None)
    target = Path(path) if path else default_record_path(layout_of(args))
    try:
        add_phase_mark(target, args.name, time.time())
    except RecordError as exc:
        return fail(str(exc))
    say(f"phase {args.name} marked in {target} (applied at the session's next tick)", sys.stdout)
    return EXIT_OK
