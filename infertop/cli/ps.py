"""`infertop ps`: the monitors running for this user (one per layout)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from infertop.cli.common import EXIT_OK, MAX_MESSAGE_CHARS, say
from infertop.collectors.safe_text import inert_text
from infertop.monitor.channel.client import list_monitors
from infertop.monitor.channel.protocol import Info
from infertop.monitor.record.store import state_dir

NAME = "ps"
HELP = "list the running monitors (layout, pid, started, viewers, record)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    del p  # no options: every monitor of this user's state directory


HEADINGS = ("PID", "STARTED", "VIEWERS", "CLUSTER", "LAYOUT", "RECORD")
RIGHT_ALIGNED = {"PID", "VIEWERS"}


def table_lines(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """The headings and rows in columns as wide as their widest cell (numbers to the
    right); each cell made inert first, so that its width is the one printed."""
    cells = [tuple(inert_text(c, MAX_MESSAGE_CHARS) for c in row) for row in [HEADINGS, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADINGS))]
    return [
        "  ".join(c.rjust(w) if h in RIGHT_ALIGNED else c.ljust(w)
                  for c, w, h in zip(row, widths, HEADINGS, strict=True)).rstrip()
        for row in cells
    ]


def run(args: argparse.Namespace) -> int:
    found = list_monitors(state_dir())
    live = [info for _path, info in found if isinstance(info, Info)]
    if not live:
        say("infertop: no monitors running", sys.stdout)
    else:
        rows = [
            (str(info.pid), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started_at)),
             str(info.viewers), info.cluster, info.layout or "(this machine)",
             info.record or "(not recording)")
            for info in live
        ]
        for line in table_lines(rows):
            say(line, sys.stdout)
    for path, why in found:
        if not isinstance(why, Info):
            say(f"infertop: {path}: {why}", sys.stdout)
    return EXIT_OK
