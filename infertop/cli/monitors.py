"""Finding a layout's monitor process, starting one, and viewing it (not a subcommand).

A monitor is `infertop record` serving the layout's socket (monitor/channel/). The TUI
attaches to the one already running for its layout, or starts one as a detached child
(its own session, output to a log in the state directory), so that closing or killing
the TUI leaves the record running.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import infertop
from infertop.cli.common import EXIT_FAIL, say, user_theme
from infertop.layouts.model import Layout
from infertop.monitor.channel.client import Connection, MonitorUnavailable, SocketFeed
from infertop.monitor.channel.paths import MonitorBusy, MonitorLock, log_path, private_state_dir, socket_path
from infertop.monitor.channel.protocol import Info

START_TIMEOUT_S = 60.0  # imports and the first connections, on a busy 2-core machine
LOG_TAIL_LINES = 5


def layout_flag(layout: Layout) -> str:
    """` --layout FILE` as the user would type it, or nothing for this machine's layout."""
    return f" --layout {shlex.quote(str(Path(layout.source_path).resolve()))}" if layout.source_path else ""


def running_monitor(layout: Layout) -> Info | None:
    """The info of the monitor running for `layout`, None when none runs (a stale socket
    counts as none: the next monitor replaces it)."""
    try:
        with Connection(socket_path(layout), timeout_s=2.0) as conn:
            return conn.info
    except MonitorUnavailable:
        return None


def child_env() -> dict[str, str]:
    # the child imports the same infertop as this process (a checkout run with PYTHONPATH,
    # or an installed copy): its rooms are the folders beside the infertop package
    root = str(Path(infertop.__file__).resolve().parent.parent)
    paths = [root, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def start_monitor(
    layout: Layout, record: str | None, recording: bool = True, exit_with: int | None = None
) -> subprocess.Popen[bytes]:
    """`infertop record --quiet` for `layout`, detached: it outlives this process (unless
    `exit_with` names a process whose end it follows: the demo's)."""
    socket = socket_path(layout)
    private_state_dir(socket.parent)
    log = log_path(socket)
    argv = [sys.executable, "-m", "infertop"]
    if layout.source_path:
        argv += ["--layout", str(Path(layout.source_path).resolve())]
    argv += ["record", "--quiet"]
    if record:
        argv += ["--record", str(Path(record).resolve())]
    if not recording:
        argv += ["--no-record"]
    if exit_with is not None:
        argv += ["--exit-with", str(exit_with)]
    # the interval this command settled on (its --interval, the user's config): the child
    # reads the layout file again and must poll as this command would have
    argv += ["--interval", repr(layout.cluster.interval_s)]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(argv)}\n".encode())
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True,
            env=child_env(),
        )
    finally:
        os.close(fd)


def _log_tail(layout: Layout) -> str:
    with contextlib.suppress(OSError):
        text = log_path(socket_path(layout)).read_text(errors="replace")
        lines = text.rsplit("\n--- ", 1)[-1].strip().splitlines()[1:]  # this start's, not its header
        if lines:
            return " / ".join(lines[-LOG_TAIL_LINES:])
    return "no output"


def _another_monitor_holds(layout: Layout) -> bool:
    """Whether a monitor process holds the layout's monitor lock (tried, and let go at once)."""
    try:
        lock = MonitorLock.take(socket_path(layout), "infertop: a viewer checking the monitor lock")
    except MonitorBusy:
        return True
    except OSError:
        return False
    lock.release()
    return False


def wait_for_monitor(
    layout: Layout, child: subprocess.Popen[bytes], timeout_s: float = START_TIMEOUT_S
) -> Info:
    """Until the monitor answers on the layout's socket (ours, or one started at the same
    moment by another viewer). MonitorUnavailable with the child's last words otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = running_monitor(layout)
        if info is not None:
            return info
        exited = child.poll() is not None
        # ours lost the race to a monitor another viewer started at the same moment: that
        # one holds the lock and serves once its first connections are made (seconds at
        # 128 nodes): wait for it, as for ours
        if (exited and not _another_monitor_holds(layout)) or time.monotonic() > deadline:
            if not exited:
                child.terminate()
            raise MonitorUnavailable(
                f"the monitor did not start (log {log_path(socket_path(layout))}: {_log_tail(layout)})",
                exit_code=child.returncode,
            )
        time.sleep(0.1)


def view(layout: Layout, info: Info, outlives: bool = True) -> int:
    """The TUI on the running monitor, until the user quits or the monitor ends; then
    whether the monitor goes on (`outlives`: it was not started to end with us)."""
    from infertop.tui.app import run_feed  # Textual loads only for the TUI

    feed = SocketFeed(layout, socket_path(layout))
    code = run_feed(feed, theme=user_theme())
    if feed.frames == 0 and feed.end_reason is not None:  # never attached: gone meanwhile
        say(f"infertop: {feed.end_reason}")
        return code or EXIT_FAIL
    if not outlives:
        return code
    after = running_monitor(layout)
    if after is not None and after.pid == info.pid:
        where = f", recording to {after.record}" if after.record else ""
        say(f"infertop: the monitor (pid {after.pid}) goes on{where}; "
            f"stop it with: infertop stop{layout_flag(layout)}")
    else:
        say(f"infertop: the monitor (pid {info.pid}) has stopped"
            + (f"; session record {info.record} (infertop report {info.record})" if info.record else ""))
    return code


def describe(info: Info) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started_at))
    return f"pid {info.pid}, started {started}, record {info.record or '(none)'}"

