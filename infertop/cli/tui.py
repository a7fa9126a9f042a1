"""`infertop [--layout F] [--record FILE | --no-record]`: the live TUI (no subcommand).

The TUI is a viewer: it attaches to the monitor process already running for the layout,
or starts one (`infertop record --quiet`, detached: it keeps recording after the TUI
quits or is killed; `infertop stop` ends it). `--no-record` keeps the monitor inside the
TUI's own process, as a quick look that records nothing and ends with the TUI.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from infertop.cli.common import EXIT_BAD_INPUT, EXIT_FAIL, fail, layout_of, say, user_theme
from infertop.cli.monitors import running_monitor, start_monitor, view, wait_for_monitor
from infertop.layouts.model import Layout
from infertop.monitor.channel.client import MonitorUnavailable
from infertop.monitor.feeds import MonitorFeed


def live_feed(layout: Layout, record: str | None, recording: bool = True) -> MonitorFeed:
    """A monitor in this process; with the session record (resumed when still open) unless
    told not to. Its tick rows are written off the event loop: a frame must not wait on disk.
    Raises RecordError."""
    from infertop.monitor.record.store import Recorder  # a viewer attached to a monitor needs no record

    if not recording:
        return MonitorFeed(layout)
    recorder = Recorder.open(layout, Path(record) if record else None, background=True)
    return MonitorFeed(layout, recorder=recorder)


def run_in_process(layout: Layout) -> int:
    from infertop.tui.app import run_feed  # Textual loads only for the TUI

    return run_feed(live_feed(layout, None, recording=False), theme=user_theme())


def run(args: argparse.Namespace) -> int:
    layout = layout_of(args)
    if args.no_record:
        return run_in_process(layout)
    info = running_monitor(layout)
    if info is None:
        try:
            child = start_monitor(layout, args.record)
        except OSError as exc:
            return fail(f"cannot start the monitor: {exc.strerror or exc}")
        say(f"infertop: starting the monitor for this layout (pid {child.pid})")
        try:
            info = wait_for_monitor(layout, child)
        except MonitorUnavailable as exc:
            say(f"infertop: {exc}")
            return EXIT_BAD_INPUT if exc.exit_code == EXIT_BAD_INPUT else EXIT_FAIL
    elif args.record and info.record != str(Path(args.record).resolve()):
        say(f"infertop: attaching to the monitor already running for this layout (pid {info.pid}), "
            f"which records to {info.record or 'nothing'}, not {args.record}")
    return view(layout, info)
