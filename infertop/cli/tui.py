"""`infertop [--layout F] [--record FILE | --no-record]`: the live TUI (no subcommand).

The front door wires the feed — the monitor over the layout's sources, with the session
record unless `--no-record` — and hands it to the TUI, which only draws what it receives.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from infertop.cli.common import EXIT_FAIL, fail, layout_of, say, user_theme
from layouts.model import Layout
from monitor.feeds import MonitorFeed
from monitor.record.store import Recorder, RecordError


def live_feed(layout: Layout, record: str | None, recording: bool = True) -> MonitorFeed:
    """The live feed; with the session record (resumed when still open) unless told not
    to. Its tick rows are written off the event loop: a frame must not wait on disk.
    Raises RecordError."""
    if not recording:
        return MonitorFeed(layout)
    recorder = Recorder.open(layout, Path(record) if record else None, background=True)
    return MonitorFeed(layout, recorder=recorder)


def run(args: argparse.Namespace) -> int:
    from tui.app import run_feed  # Textual loads only for the TUI

    layout = layout_of(args)
    try:
        feed = live_feed(layout, args.record, recording=not args.no_record)
    except RecordError as exc:
        return fail(str(exc))
    recorder = feed.monitor.recorder
    code = EXIT_FAIL
    try:
        code = run_feed(feed, theme=user_theme())
    finally:
        if recorder is not None:
            # the TUI has left the screen: say where the session went, and what it is missing
            path = recorder.path
            say(f"infertop: session record {path} (infertop report {path})")
            lost = recorder.lost_ticks()
            if lost is not None:
                say(f"infertop: {lost}")
                code = code or EXIT_FAIL
    return code
