"""`infertop record`: the monitor headless, recording the session tick by tick."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from infertop.cli.argtypes import positive_float
from infertop.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    add_layout_arg,
    add_record_args,
    fail,
    layout_of,
    say,
)
from monitor.format import fmt_usd
from monitor.monitor import Monitor
from monitor.record.store import Recorder, RecordError
from monitor.snapshot import Snapshot
from monitor.stopping import Stop, run_stoppable

NAME = "record"
HELP = "record the session headless (no TUI): ledger and snapshots to SQLite, tick by tick"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    add_record_args(p)
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="stop after S seconds (default: until interrupted)")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per tick on stdout")


def tick_line(snapshot: Snapshot) -> str:
    s = snapshot.session
    # the same budget words as the TUI ("97% of $600", "over by $12.40 of $600")
    alert = f"  budget {s.budget_label}" if s.budget_alert and s.budget_label else ""
    return (
        f"{snapshot.taken_at}  phase {s.phase:<7} spend {fmt_usd(s.spend_usd)}"
        f"  {fmt_usd(s.cost_per_hour_usd)}/h  idle {fmt_usd(s.idle_spend_usd)}{alert}"
    )


async def _record(args: argparse.Namespace, stop: Stop) -> int:
    layout = layout_of(args)
    path = getattr(args, "record", None)
    try:
        recorder = Recorder.open(layout, Path(path) if path else None)
    except RecordError as exc:
        return fail(str(exc))
    monitor = Monitor(layout, recorder=recorder)
    how = "resuming the session that began" if recorder.store.resumed else "new session, reservation start"
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(monitor.ledger.started_at))
    say(f"infertop: recording to {recorder.path} ({how} {start})")
    if not args.quiet:
        def show(snapshot: Snapshot) -> None:
            say(tick_line(snapshot), sys.stdout)

        monitor.listeners.append(show)
    await monitor.start()
    try:
        # SIGINT / SIGTERM end a recording normally (exit 0), as --duration does
        if args.duration is not None:
            await stop.sleep(args.duration)
        else:
            await stop.wait()
    finally:
        await monitor.stop()  # closes the record
    lost = recorder.lost_ticks()
    if lost is not None:  # a full disk: the record has holes, and a script must know
        say(f"infertop: {lost}")
        return EXIT_FAIL
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    stop = Stop()
    return run_stoppable(_record(args, stop), stop)
