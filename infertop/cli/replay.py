"""`infertop replay RECORD`: the TUI on a recording, with pause and seek."""

from __future__ import annotations

import argparse
from pathlib import Path

from infertop.cli.argtypes import positive_float
from infertop.cli.common import EXIT_OK, fail
from infertop.monitor.record.replay import ReplayFeed
from infertop.monitor.record.store import RecordError

NAME = "replay"
HELP = "the TUI on a session record, with pause (space) and seek ([ ] { } 0 9)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a session record (.sqlite)")
    p.add_argument("--speed", type=positive_float, default=1.0, metavar="X",
                   help="play X times faster than recorded (default 1)")


def run(args: argparse.Namespace) -> int:
    try:
        feed = ReplayFeed.open(Path(args.file), args.speed)
    except RecordError as exc:
        return fail(str(exc))
    from infertop.tui.replay_app import run_replay  # Textual loads only for the TUI

    code = run_replay(feed)
    problems = feed.recording.problems
    if problems and code == EXIT_OK:  # the screen is gone: say what could not be shown
        return fail(f"{args.file}: damaged recording ({problems[0]}); "
                    f"the replay showed the {feed.frames_shown()} readable frames")
    return code
