"""Where a layout's monitor lives: its socket, its lock and its log in the state directory.

One monitor per layout: the names come from `layout_key` (the cluster's name and a hash of
the layout file's resolved path), the same key as the layout's default session record.
The lock (`KEY.monitor.lock`, an exclusive flock held for the monitor's lifetime) says
whether a monitor is alive: the kernel drops it when its holder dies, SIGKILL included,
so a socket file left behind by a killed monitor is known to be stale and is replaced.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from layouts.model import Layout
from monitor.record.places import PRIVATE_DIR_MODE, layout_key, state_dir

SOCKET_SUFFIX = ".sock"
# sun_path holds 108 bytes with its NUL; a longer path is reached through its directory
_MAX_SUN_PATH = 100


class MonitorBusy(Exception):
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
    directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)


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


class MonitorLock:
    """The flock that makes one monitor per layout; its file names the holder."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, socket: Path, holder: str) -> MonitorLock:
        """Lock the layout's monitor slot; MonitorBusy naming the holder when it is taken.
        OSError when the lock file cannot be made."""
        path = lock_path(socket)
        private_state_dir(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raw = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise MonitorBusy(raw or "another process") from None
        except OSError:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} ({holder})\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

