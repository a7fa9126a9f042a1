"""`infertop ps`: the monitors running for this user (one per layout)."""

from __future__ import annotations

import argparse
import sys
import time

from infertop.cli.common import EXIT_OK, say
from monitor.channel.client import list_monitors
from monitor.channel.protocol import Info
from monitor.record.store import state_dir

NAME = "ps"
HELP = "list the running monitors (layout, pid, started, viewers, record)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    del p  # no options: every monitor of this user's state directory


def run(args: argparse.Namespace) -> int:
    found = list_monitors(state_dir())
    live = [(path, info) for path, info in found if isinstance(info, Info)]
    if not live:
        say("infertop: no monitors running", sys.stdout)
    else:
        say(f"{'PID':>7}  {'STARTED':<19}  {'VIEWERS':>7}  {'CLUSTER':<20}  LAYOUT  RECORD", sys.stdout)
    for _path, info in live:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started_at))
        say(f"{info.pid:>7}  {started:<19}  {info.viewers:>7}  {info.cluster:<20}  "
            f"{info.layout or '(this machine)'}  {info.record or '(not recording)'}", sys.stdout)
    for path, why in found:
        if not isinstance(why, Info):
            say(f"infertop: {path}: {why}", sys.stdout)
    return EXIT_OK
