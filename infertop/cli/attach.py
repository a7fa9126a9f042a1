"""`infertop attach [--layout F]`: the TUI on the monitor already running for a layout.

Attaches only: when no monitor runs (none was started, or it died and left a stale
socket) it says how to start one and exits 1. `infertop --layout F` attaches or starts.
"""

from __future__ import annotations

import argparse

from infertop.cli.common import EXIT_FAIL, add_layout_arg, layout_of, say
from infertop.cli.monitors import layout_flag, running_monitor, view

NAME = "attach"
HELP = "view the monitor already running for a layout (started by `record` or another TUI)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)


def run(args: argparse.Namespace) -> int:
    layout = layout_of(args)
    info = running_monitor(layout)
    if info is None:
        flag = layout_flag(layout)
        say(f"infertop: no monitor runs for this layout; start one with: infertop record{flag} "
            f"(headless) or infertop{flag} (with the TUI)")
        return EXIT_FAIL
    return view(layout, info)
