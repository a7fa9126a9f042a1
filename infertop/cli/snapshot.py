"""`infertop snapshot`: one collection over a window, printed as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, TextIO

from infertop.cli.argtypes import window_s
from infertop.cli.common import EXIT_FAIL, EXIT_OK, add_layout_arg, layout_of, say
from infertop.collectors.process.stopping import Stop, run_stoppable
from infertop.monitor.snapshot import Snapshot

if TYPE_CHECKING:
    from infertop.monitor.take_snapshot import Progress

NAME = "snapshot"
HELP = "one collection over a window, then exit"
#: `--fail-on`: some node has an established verdict at least this severe
EXIT_VERDICT = 3
_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layout_arg(p)
    p.add_argument(
        "--window", type=window_s, default=None, metavar="S",
        help="seconds to collect before the snapshot (default: the layout's window_s)",
    )
    p.add_argument("--json", action="store_true", help="print infertop.snapshot/1 JSON")
    p.add_argument(
        "--fail-on", choices=("warning", "critical"), default=None,
        help=f"exit {EXIT_VERDICT} when a node has a verdict at least this severe "
        "(a node in error or unreachable is critical), or the cluster a blind spot every node "
        "shares (a warning; info for RoCE congestion counters alone), or a metrics backend is "
        "down (critical, once); pending verdicts do not count",
    )


def failing_verdicts(snapshot: Snapshot, level: str) -> list[str]:
    """`node: kind` of every established verdict at `level` or worse, and the cluster's
    blind spots every node shares (said once there instead of on each node: unknown is
    never healthy, so a gate that failed on N blind nodes still fails)."""
    floor = _SEVERITY_RANK[level]
    return [
        f"{n.name}: {v.kind}"
        for n in snapshot.nodes
        for v in n.verdicts
        if not v.pending and _SEVERITY_RANK.get(v.severity, 0) >= floor
    ] + [
        f"cluster: blind on {spot.nodes} node{'s' if spot.nodes != 1 else ''}"
        for spot in snapshot.cluster.shared_blind_spots
        if _SEVERITY_RANK.get(spot.severity, 0) >= floor
    ] + [
        # a backend down is critical once, on the backend: its nodes are unknown, not failing
        f"{b.role} {b.name}: down" for b in snapshot.backends if b.status == "down"
    ]


class ProgressLine:
    """One line on a terminal, rewritten in place ("reading 16 nodes — 6 of 10 s") and
    erased at the end, so the table or JSON that follows starts on a clean line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def show(self, progress: Progress) -> None:
        from infertop.monitor.take_snapshot import progress_line

        self.stream.write("\r\x1b[K" + progress_line(progress))
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    layout = layout_of(args)
    from infertop.monitor.take_snapshot import (  # the collectors load for this command only
        nothing_read,
        take_snapshot,
    )
    from infertop.monitor.text_report import snapshot_table

    stop = Stop()
    # a line that counts the window on a terminal; piped or redirected, stderr stays empty
    line = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        snapshot = run_stoppable(
            take_snapshot(layout, args.window, stop=stop, progress=line.show if line else None), stop
        )
    finally:
        if line is not None:
            line.clear()
    if snapshot is None:  # interrupted before the window ended: nothing to show
        return stop.exit_code or EXIT_FAIL
    unread = nothing_read(snapshot)
    if unread is not None:  # every node in error or silent: not a snapshot of anything
        say(f"infertop: {unread}")
        return EXIT_FAIL
    if args.json:
        # strict JSON: NaN / Infinity are not JSON (to_json_dict has made them null)
        json.dump(snapshot.to_json_dict(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(snapshot_table(snapshot))
    if args.fail_on is not None:
        failing = failing_verdicts(snapshot, args.fail_on)
        if failing:
            shown = ", ".join(failing[:5]) + (f" and {len(failing) - 5} more" if len(failing) > 5 else "")
            say(f"infertop: {len(failing)} verdict(s) at {args.fail_on} or worse: {shown}")
            return EXIT_VERDICT
    return EXIT_OK
