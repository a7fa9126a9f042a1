"""The state directory and what lives in it: where it is, each layout's key, private files, one lock.

Both the session record (monitor/record/store.py: `KEY.sqlite` and its `.lock`) and the
monitor's channel (monitor/channel/paths.py: `KEY.sock`, `KEY.monitor.lock`, `KEY.monitor.log`)
keep their files here, named from the same `layout_key`.

Privacy: the directory is created 0700 and files 0600 (an existing directory is never
chmod-ed: it may be shared, e.g. a pointed-to /tmp).

`StateLock` is an exclusive `flock` on a lock file, held for a holder's lifetime. The kernel
releases a flock when its holder dies, SIGKILL included, so a stale lock file never blocks
the next holder; the file itself is left in place (unlinking it would let a waiting holder
and a new one lock two different files). The file says who holds it (pid and command), for
the second one's error.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shlex
import stat
import sys
from pathlib import Path

from infertop.collectors.safe_text import whole_number
from infertop.layouts.model import Layout
from infertop.monitor.record.checks import printable

log = logging.getLogger(__name__)

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def state_dir() -> Path:
    """$INFERTOP_STATE_DIR, else $XDG_STATE_HOME/infertop, else ~/.local/state/infertop."""
    explicit = os.environ.get("INFERTOP_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "infertop"


def layout_key(layout: Layout) -> str:
    """A file-name-safe name for a layout's session: its cluster name and where it lives."""
    identity = str(Path(layout.source_path).resolve()) if layout.source_path else "<built-in>"
    digest = hashlib.sha256(f"{identity}\0{layout.cluster.name}".encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", layout.cluster.name).strip("-.")[:40] or "cluster"
    return f"{slug}-{digest}"


def make_private_dir(directory: Path) -> None:
    """`directory`, created 0700 when missing (an existing one is left as it is)."""
    directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)


def private_dir(directory: Path) -> None:
    """Create `directory` 0700; say so when the state directory is open to other users.

    An existing directory is never chmod-ed (it may be shared, e.g. a pointed-to /tmp):
    the record in it is 0600 either way, but its name (the cluster's) is visible.
    """
    make_private_dir(directory)
    if directory.resolve() == state_dir().resolve():
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & 0o077:
            log.warning("state directory %s is open to other users (mode %s): chmod 700 %s",
                        directory, oct(mode), directory)


def create_private_file(path: Path) -> None:
    """An empty file that only its owner can read (made before SQLite opens the path)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    os.close(fd)


def tighten(path: Path, suffixes: tuple[str, ...] = ("",)) -> None:
    """A file (and its siblings `path` + each suffix) from before it was private: make it 0600."""
    for suffix in suffixes:
        part = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            mode = part.lstat().st_mode
            # a regular file only: chmod follows symlinks, and a link is not ours to change
            if stat.S_ISREG(mode) and stat.S_IMODE(mode) & 0o077:
                try:
                    part.chmod(PRIVATE_FILE_MODE)
                except OSError as exc:
                    log.warning("%s is open to other users and cannot be made private: %s", part, exc)


def command_line() -> str:
    """This process's command, as a lock holder's description in a second holder's error."""
    argv = sys.argv or ["python"]
    # `python -m infertop …` runs infertop/__main__.py: name it as the user typed it
    program = "infertop" if argv[0].endswith("__main__.py") else Path(argv[0]).name
    return printable(shlex.join([program, *argv[1:]]))


class LockBusy(Exception):
    """Another live process holds the lock. `str()` names it: 'pid 1234 (infertop record …)'."""


def _lock_holder(fd: int) -> str:
    """'pid 1234 (infertop record …)' from a lock file (written by any process: made inert).

    Written as 'PID COMMAND'; a monitor lock written before the one lock class reads
    'pid PID (COMMAND)', and is read too.
    """
    raw = os.pread(fd, 512, 0).decode("utf-8", "replace").strip().removeprefix("pid ")
    pid, _, command = raw.partition(" ")
    if whole_number(pid) is None:
        return "another process"
    if command.startswith("(") and command.endswith(")"):
        command = command[1:-1]
    return f"pid {pid} ({printable(command)})" if command else f"pid {pid}"


class StateLock:
    """An exclusive `flock` on a lock file in the state directory; its file names the holder."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def hold(cls, path: Path, holder: str) -> StateLock:
        """Lock `path` for this process, `holder` describing it; LockBusy naming the holder
        when another process has it, OSError when the lock file cannot be made or locked."""
        # O_NOFOLLOW: a symlink planted here must not make us create or truncate its target
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holding = _lock_holder(fd)
            os.close(fd)
            raise LockBusy(holding) from None
        except OSError:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):  # who holds it is a courtesy: a full disk may refuse it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {holder}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)  # while still held: no one else has written yet
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None
