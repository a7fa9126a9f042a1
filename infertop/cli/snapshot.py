"""`infertop snapshot`: one collection over a window, printed as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from infertop.cli.argtypes import positive_float
from infertop.cli.common import EXIT_FAIL, EXIT_OK, add_layout_arg, layout_of
from monitor.stopping import Stop, run_stoppable
from monitor.take_snapshot import take_snapshot
from monitor.text_report import snapshot_table

NAME = "snapshot"
HELP = "one collection over a window, then exit"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    p.add_argument(
        "--window", type=positive_float, default=None, metavar="S",
        help="seconds to collect before the snapshot (default: the layout's window_s)",
    )
    p.add_argument("--json", action="store_true", help="print infertop.snapshot/1 JSON")


def run(args: argparse.Namespace) -> int:
    layout = layout_of(args)
    stop = Stop()
    snapshot = run_stoppable(take_snapshot(layout, args.window, stop=stop), stop)
    if snapshot is None:  # interrupted before the window ended: nothing to show
        return stop.exit_code or EXIT_FAIL
    if args.json:
        # strict JSON: NaN / Infinity are not JSON (to_json_dict has made them null)
        json.dump(snapshot.to_json_dict(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(snapshot_table(snapshot))
    return EXIT_OK
