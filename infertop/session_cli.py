"""Subcommands for the session record: `record`, `phase`, `report`, `replay`.

Imported by `infertop.cli` to register them; Textual loads only for `replay`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from infertop.argtypes import non_negative_int, positive_float
from infertop.cli import EXIT_BAD_INPUT, EXIT_OK, SUBCOMMANDS, _layout_or_local, add_layout_arg
from infertop.format import fmt_usd
from infertop.report import write_report
from infertop.session import PHASES
from infertop.stopping import Stop, run_stoppable
from infertop.store import Recorder, RecordError, Recording, add_phase_mark, default_record_path
from infertop.view import Snapshot
from layouts.model import Layout

if TYPE_CHECKING:
    from infertop.feed import MonitorFeed


def _fail(message: str) -> int:
    print(f"infertop: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT




def add_record_args(p: argparse.ArgumentParser) -> None:
    """`--record FILE` / `--no-record`, shared by the TUI and `record`."""
    p.add_argument(
        "--record", metavar="FILE", default=argparse.SUPPRESS,
        help="session record file (default: one per layout in the state directory)",
    )


# ------------------------------------------------------------------------- record


def tick_line(snapshot: Snapshot) -> str:
    s = snapshot.session
    alert = f"  budget {s.budget_alert}" if s.budget_alert else ""
    return (
        f"{snapshot.taken_at}  phase {s.phase:<7} spend {fmt_usd(s.spend_usd)}"
        f"  {fmt_usd(s.cost_per_hour_usd)}/h  idle {fmt_usd(s.idle_spend_usd)}{alert}"
    )


async def _record(args: argparse.Namespace, stop: Stop) -> int:
    from infertop.runtime import Monitor

    layout = _layout_or_local(getattr(args, "layout", None))
    monitor = Monitor(layout)
    path = getattr(args, "record", None)
    try:
        recorder = Recorder.attach(monitor, Path(path) if path else None)
    except RecordError as exc:
        return _fail(str(exc))
    ledger = monitor.ledger
    how = "resuming the session that began" if recorder.store.resumed else "new session, reservation start"
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ledger.started_at))
    print(f"infertop: recording to {recorder.path} ({how} {start})", file=sys.stderr, flush=True)
    if not args.quiet:
        def show(snapshot: Snapshot) -> None:
            print(tick_line(snapshot), flush=True)

        monitor.listeners.append(show)
    await monitor.start()
    try:
        # SIGINT / SIGTERM end a recording normally (exit 0), as --duration does
        if args.duration is not None:
            await stop.sleep(args.duration)
        else:
            await stop.wait()
    finally:
        await monitor.stop()
        recorder.close()
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    stop = Stop()
    return run_stoppable(_record(args, stop), stop)


def _add_record(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    add_record_args(p)
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="stop after S seconds (default: until interrupted)")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per tick on stdout")


SUBCOMMANDS["record"] = (
    "record the session headless (no TUI): ledger and snapshots to SQLite, tick by tick",
    _add_record, cmd_record,
)


# ------------------------------------------------------------------------- phase


def cmd_phase(args: argparse.Namespace) -> int:
    path = getattr(args, "record", None)
    target = Path(path) if path else default_record_path(_layout_or_local(getattr(args, "layout", None)))
    try:
        add_phase_mark(target, args.name, time.time())
    except RecordError as exc:
        return _fail(str(exc))
    print(f"phase {args.name} marked in {target} (applied at the session's next tick)")
    return EXIT_OK


def _add_phase(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", choices=PHASES, help="the phase spend is attributed to from now on")
    add_layout_arg(p)
    add_record_args(p)


SUBCOMMANDS["phase"] = ("mark the running session's phase (build, load, warmup, run, failed, idle)",
                        _add_phase, cmd_phase)


# ------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        rec = Recording.load(path)
    except RecordError as exc:
        return _fail(str(exc))
    try:
        out = Path(args.out) if args.out else path.with_name(f"{path.stem}-report")
        try:
            written = write_report(rec, out, args.acceptable_tasks)
        except OSError as exc:
            return _fail(f"{out}: cannot write the report: {exc.strerror or exc}")
        for p in written:
            print(p)
        if rec.problems:
            return _fail(f"{path}: damaged recording ({rec.problems[0]}); "
                         f"the report covers the {len(rec.ticks)} readable ticks")
        return EXIT_OK
    finally:
        rec.close()


def _add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a session record (.sqlite)")
    p.add_argument("--out", metavar="DIR", default=None, help="where to write (default: FILE-report/)")
    p.add_argument("--acceptable-tasks", type=non_negative_int, default=None, metavar="N",
                   help="tasks you count as acceptable, for $ per acceptable task")


SUBCOMMANDS["report"] = ("Markdown summary, CSVs and a chart from a session record", _add_report, cmd_report)


# ------------------------------------------------------------------------- the live TUI


def recorded_feed(layout: Layout, record: str | None) -> MonitorFeed:
    """The live feed with the session record attached (resumed when still open)."""
    from infertop.feed import MonitorFeed

    class RecordedFeed(MonitorFeed):
        def __init__(self) -> None:
            super().__init__(layout)
            # the TUI: tick rows written off the event loop (the frame must not wait on disk)
            self.recorder = Recorder.attach(self.monitor, Path(record) if record else None,
                                            background=True)
            self._closed = False

        def mark_phase(self, phase: str) -> None:
            # through the ledger's own marking: exact to the second, and kept in the record
            self.monitor.mark_phase(phase)

        async def stop(self) -> None:
            await super().stop()
            if not self._closed:
                self._closed = True
                self.recorder.close()

    return RecordedFeed()


def run_recorded_tui(layout: Layout, record: str | None) -> int:
    """`infertop [--layout F] [--record FILE]`: the TUI, recording the session."""
    from tui.app import run_feed  # Textual loads only for the TUI

    try:
        feed = recorded_feed(layout, record)
    except RecordError as exc:
        return _fail(str(exc))
    path = feed.monitor.record_path
    try:
        return run_feed(feed)
    finally:
        # the TUI has left the screen: say where the session went
        print(f"infertop: session record {path} (infertop report {path})", file=sys.stderr)


# ------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    from infertop.replay import ReplayFeed

    try:
        feed = ReplayFeed.open(Path(args.file), args.speed)
    except RecordError as exc:
        return _fail(str(exc))
    from tui.replay_app import run_replay  # Textual loads only for the TUI

    return run_replay(feed)


def _add_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a session record (.sqlite)")
    p.add_argument("--speed", type=positive_float, default=1.0, metavar="X",
                   help="play X times faster than recorded (default 1)")


SUBCOMMANDS["replay"] = ("the TUI on a session record, with pause (space) and seek ([ ] { } 0 9)",
                         _add_replay, cmd_replay)
