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
from infertop.cli import (
    EXIT_BAD_INPUT,
    EXIT_FAIL,
    EXIT_OK,
    SUBCOMMANDS,
    _layout_or_local,
    add_layout_arg,
    say,
)
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
    say(f"infertop: {message}")
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
    path = getattr(args, "record", None)
    try:
        recorder = Recorder.open(layout, Path(path) if path else None)
    except RecordError as exc:
        return _fail(str(exc))
    monitor = Monitor(layout, recorder=recorder)
    ledger = monitor.ledger
    how = "resuming the session that began" if recorder.store.resumed else "new session, reservation start"
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ledger.started_at))
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
    say(f"phase {args.name} marked in {target} (applied at the session's next tick)", sys.stdout)
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
            say(p, sys.stdout)
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
    """The live feed with the session record (resumed when still open). Its tick rows are
    written off the event loop: the frame must not wait on disk. Raises RecordError."""
    from infertop.feed import MonitorFeed

    recorder = Recorder.open(layout, Path(record) if record else None, background=True)
    return MonitorFeed(layout, recorder=recorder)


def run_recorded_tui(layout: Layout, record: str | None) -> int:
    """`infertop [--layout F] [--record FILE]`: the TUI, recording the session."""
    from tui.app import run_feed  # Textual loads only for the TUI

    try:
        feed = recorded_feed(layout, record)
    except RecordError as exc:
        return _fail(str(exc))
    path = feed.monitor.record_path
    code = EXIT_FAIL
    try:
        code = run_feed(feed)
    finally:
        # the TUI has left the screen: say where the session went, and what it is missing
        say(f"infertop: session record {path} (infertop report {path})")
        recorder = feed.monitor.recorder
        lost = recorder.lost_ticks() if recorder is not None else None
        if lost is not None:
            say(f"infertop: {lost}")
            code = code or EXIT_FAIL
    return code


# ------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    from infertop.replay import ReplayFeed

    try:
        feed = ReplayFeed.open(Path(args.file), args.speed)
    except RecordError as exc:
        return _fail(str(exc))
    from tui.replay_app import run_replay  # Textual loads only for the TUI

    code = run_replay(feed)
    problems = feed.recording.problems
    if problems and code == EXIT_OK:  # the screen is gone: say what could not be shown
        return _fail(f"{args.file}: damaged recording ({problems[0]}); "
                     f"the replay showed the {feed.frames_shown()} readable frames")
    return code


def _add_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a session record (.sqlite)")
    p.add_argument("--speed", type=positive_float, default=1.0, metavar="X",
                   help="play X times faster than recorded (default 1)")


SUBCOMMANDS["replay"] = ("the TUI on a session record, with pause (space) and seek ([ ] { } 0 9)",
                         _add_replay, cmd_replay)
