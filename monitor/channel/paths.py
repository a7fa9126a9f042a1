"""Where a layout's monitor lives: its socket, its lock and its log in the state directory.

One monitor per layout: the names come from `layout_key` (the cluster's name and a hash of
the layout file's resolved path), the same key as the layout's default session record.
The lock (`KEY.monitor.lock`, an exclusive flock held for the monitor's lifetime) says
whether a monitor is alive: the kernel drops it when its holder dies, SIGKILL included,
so a socket file left behind by a killed monitor is known to be stale and is replaced.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from infertop.layouts.model import Layout
from infertop.monitor.state import LockBusy, StateLock, layout_key, make_private_dir, state_dir

SOCKET_SUFFIX = ".sock"
# sun_path holds 108 bytes with its NUL; a longer path is reached through its directory
_MAX_SUN_PATH = 100


class MonitorBusy(LockBusy):
    """A live monitor already holds this layout. `str()` names it (pid and command)."""


def socket_path(layout: Layout) -> Path:
    return state_dir() / f"{layout_key(layout)}{SOCKET_SUFFIX}"


def lock_path(socket: Path) -> Path:
    return socket.with_name(socket.name.removesuffix(SOCKET_SUFFIX) + ".monitor.lock")


def log_path(socket: Path) -> Path:
    return socket.with_name(socket.name.removesuffix(SOCKET_SUFFIX) + ".monitor.log")


def private_state_dir(directory: Path) -> None:
    """The state directory, created 0700 when missing (an existing one is left as it is:
    the record store warns when it is open to others; the socket itself is 0600)."""
    make_private_dir(directory)


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for `path` that fits a Unix socket address: itself, or, when too long (a deep
    state directory), the same file through /proc/self/fd of its opened directory."""
    if len(os.fsencode(str(path))) <= _MAX_SUN_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class MonitorLock(StateLock):
    """The flock that makes one monitor per layout (`KEY.monitor.lock`); its file names the holder."""

    @classmethod
    def take(cls, socket: Path, holder: str) -> StateLock:
        """Lock the layout's monitor slot; MonitorBusy naming the holder when it is taken.
        OSError when the lock file cannot be made."""
        path = lock_path(socket)
        private_state_dir(path.parent)
        try:
            return cls.hold(path, holder)
        except LockBusy as busy:
            raise MonitorBusy(str(busy)) from None
