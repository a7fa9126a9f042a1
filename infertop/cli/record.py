"""`infertop record`: the monitor headless, recording the session tick by tick.

It is the layout's one monitor process: it holds the layout's monitor lock and serves the
socket that viewers attach to (`infertop attach`, `infertop --layout F`, `ps`, `stop`,
`phase`; monitor/channel/). `--no-record` serves without writing a record.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
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
from infertop.collectors.process.gc_pacing import PacedCollector
from infertop.collectors.process.stopping import Stop, run_stoppable, watch_parent
from infertop.layouts.model import Layout
from infertop.monitor.channel.client import MonitorUnavailable, call
from infertop.monitor.channel.paths import MonitorBusy, MonitorLock, socket_path
from infertop.monitor.channel.protocol import AskInfo, Info
from infertop.monitor.format import fmt_usd
from infertop.monitor.snapshot import Snapshot

NAME = "record"
HELP = "record the session headless (no TUI): ledger and snapshots to SQLite, tick by tick"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    add_record_args(p)
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="stop after S seconds (default: until interrupted)")
    # SUPPRESS: `infertop --no-record record` (the top-level flag) works as well
    p.add_argument("--no-record", action="store_true", default=argparse.SUPPRESS,
                   help="serve the live monitor without writing a session record")
    p.add_argument("--exit-with", type=int, default=None, help=argparse.SUPPRESS)  # the demo viewer's pid
    p.add_argument("-q", "--quiet", action="store_true", help="no line per tick on stdout")


def tick_line(snapshot: Snapshot) -> str:
    s = snapshot.session
    # the same budget words as the TUI ("97% of $600", "over by $12.40 of $600")
    alert = f"  budget {s.budget_label}" if s.budget_alert and s.budget_label else ""
    return (
        f"{snapshot.taken_at}  phase {s.phase:<7} spend {fmt_usd(s.spend_usd)}"
        f"  {fmt_usd(s.cost_per_hour_usd)}/h  idle {fmt_usd(s.idle_spend_usd)}{alert}"
    )


def _busy(layout: Layout, record: Path | None, holder: str) -> str:
    """Why a second monitor on this layout is refused, naming the one that runs."""
    socket = socket_path(layout)
    try:
        info = call(socket, AskInfo(), timeout_s=2.0)
    except MonitorUnavailable:
        info = None
    from infertop.monitor.record.store import default_record_path

    running = info.record if isinstance(info, Info) else None
    target = str(record if record is not None else default_record_path(layout))
    if running is not None and running == target:
        return f"record {running} is being written by {holder}; attach or stop it"
    recording = f", recording to {running}" if running else ""
    return f"a monitor already runs for this layout: {holder}{recording}; attach or stop it"


def layout_file(layout: Layout) -> str | None:
    return str(Path(layout.source_path).resolve()) if layout.source_path else None


async def _record(args: argparse.Namespace, stop: Stop) -> int:
    from infertop.monitor.record.store import command_line  # the monitor's imports: for this command only

    layout = layout_of(args)
    path = getattr(args, "record", None)
    record = Path(path) if path else None
    socket = socket_path(layout)
    try:
        lock = MonitorLock.take(socket, command_line())
    except MonitorBusy as exc:
        return fail(_busy(layout, record, str(exc)))
    except OSError as exc:
        return fail(f"{socket.parent}: cannot take the monitor lock: {exc.strerror or exc}")
    try:
        return await _serve(args, layout, record, socket, stop)
    finally:
        lock.release()


async def _serve(
    args: argparse.Namespace, layout: Layout, record: Path | None, socket: Path, stop: Stop
) -> int:
    from infertop.monitor.channel.server import ChannelError, ChannelServer
    from infertop.monitor.monitor import Monitor
    from infertop.monitor.record.store import Recorder, RecordError

    recorder = None
    if not args.no_record:
        try:
            # with --quiet no line waits for the commit: the row is written off the tick
            recorder = Recorder.open(layout, record, background=args.quiet)
        except RecordError as exc:
            return fail(str(exc))
    monitor = Monitor(layout, recorder=recorder)
    server = ChannelServer(monitor, socket, layout_file(layout), on_stop=stop.set)
    try:
        await server.start()
    except ChannelError as exc:
        if recorder is not None:
            recorder.store.close(ended=False)  # nothing recorded yet: resumable as it was
        return fail(str(exc))
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(monitor.ledger.started_at))
    if recorder is not None:
        resumed = recorder.store.resumed
        how = "resuming the session that began" if resumed else "new session, reservation start"
        say(f"infertop: recording to {recorder.path} ({how} {start})")
    else:
        say("infertop: monitoring without a record")
    if server.replaced_stale:
        say(f"infertop: replaced the stale socket {socket} (its monitor had died)")
    say(f"infertop: viewers attach at {socket} (infertop attach{_layout_flag(layout)}; "
        f"stop with infertop stop{_layout_flag(layout)})")
    if not args.quiet:
        def show(snapshot: Snapshot) -> None:
            say(tick_line(snapshot), sys.stdout)

        monitor.listeners.append(show)
    # garbage collected after each tick, once the snapshot is out (collectors.process.gc_pacing);
    # this process is ours, so what it holds from now on for good is frozen out
    collector = PacedCollector(freeze=True)
    monitor.listeners.append(collector.after_frame)
    collector.install()
    await monitor.start()
    watching = asyncio.create_task(watch_parent(args.exit_with, stop))
    try:
        # SIGINT / SIGTERM end a recording normally (exit 0), as --duration and `infertop stop` do
        if args.duration is not None:
            await stop.sleep(args.duration)
        else:
            await stop.wait()
    finally:
        watching.cancel()
        try:
            await monitor.stop()  # closes the record
        finally:
            # after the record is closed: a viewer that sees the socket hang up (`infertop
            # stop` waits for it) knows the session is on disk
            await server.close()
    lost = recorder.lost_ticks() if recorder is not None else None
    if lost is not None:  # a full disk: the record has holes, and a script must know
        say(f"infertop: {lost}")
        return EXIT_FAIL
    return EXIT_OK


def _layout_flag(layout: Layout) -> str:
    where = layout_file(layout)
    return f" --layout {shlex.quote(where)}" if where else ""


def run(args: argparse.Namespace) -> int:
    stop = Stop()
    return run_stoppable(_record(args, stop), stop)
