"""Follow an engine's log file (or a command's output) the way `tail -F` does.

Standard library only: bundled into the probe that runs on the node
(`collectors/probe/bundle.py`); `collectors/probe/logs.py` reads lines through it.

`LogFollower` starts at the end (a days-long log is not re-read), survives rotation (a new
file under the same name: the old one is read to its end first, then the new one from its
start) and truncation (`copytruncate`: the size drops below our offset, so we start again
at 0), holds a partial last line back until its newline arrives, and bounds both the bytes
read per poll and the length of a line (an over-long line is dropped and counted).
`CommandFollower` reads a command's output the same way.
"""

from __future__ import annotations

import os
import stat
import time
from collections import deque
from typing import Any, BinaryIO

LOG_MAX_LINE_BYTES = 64 * 1024  # a stats line is ~400 bytes; longer is not ours
LOG_MAX_READ_BYTES = 4 * 1024 * 1024  # per poll: a burst is read over several polls
LOG_SEED_BYTES = 64 * 1024  # tail read at start, to know the last gauges and interval
# per poll, scanned and dropped (never kept) to find the end of an over-long line
LOG_MAX_SKIP_BYTES = 512 * 1024 * 1024
LOG_SKIP_CHUNK_BYTES = 1024 * 1024


_LOG_FILE_KINDS = {
    stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory",
}


class LogRefused(Exception):
    """The path names something that is not read as a log; the message says why."""


def open_log_file(path: str, allow_symlink_out: bool = False) -> BinaryIO:
    """Open `path` for reading if it is a regular file in the log's own directory.

    The probe often runs as root and the engine's log directory is often writable by the
    engine's user: a link there to /etc/shadow must not be read, and a FIFO must not block
    the reader forever. So the open never blocks (O_NONBLOCK: a FIFO opens at once), the
    checks are made on the open descriptor (nothing can be swapped in between), and the
    file's real path must lie under the real path of the directory named in the layout,
    unless the layout says `log_follow_symlink_out = true`. Raises LogRefused or OSError.
    """
    _check_regular(os.stat(path).st_mode)  # a socket cannot even be opened: say what it is
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        _check_regular(os.fstat(fd).st_mode)  # what was opened, whatever the path says now
        if not allow_symlink_out and not _inside_own_directory(path, fd):
            raise LogRefused(
                "resolves outside its directory (a symlink): not read "
                "(the layout may allow it: log_follow_symlink_out = true)"
            )
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _LOG_FILE_KINDS.get(stat.S_IFMT(mode), "a special file")
        raise LogRefused(f"is {kind}, not a regular file: not read")


def _inside_own_directory(path: str, fd: int) -> bool:
    home = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    try:
        # what was opened, whatever the links said a moment before (Linux)
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
    if real.endswith(" (deleted)"):  # unlinked since: still the file that was opened
        real = real[: -len(" (deleted)")]
    return os.path.dirname(real) == home or real.startswith(home.rstrip("/") + "/")


class LineSplitter:
    """Cuts a byte stream into lines, none longer than `max_line_bytes`.

    A longer line is dropped whole and counted (`overlong_lines`). Inside one, nothing of
    it is kept (`discarding` until its newline), so memory stays bounded whatever the
    writer sends. The unfinished end waits in a bytearray (appending is amortised O(1):
    a long line arriving in small pieces is not copied again on every piece). Shared by
    the log followers and by the SSH source reading the probe's stream.
    """

    def __init__(self, max_line_bytes: int):
        self.max_line_bytes = max_line_bytes
        self.overlong_lines = 0
        self.discarding = False  # inside an over-long line: drop until its newline
        self._partial = bytearray()

    def reset(self, discarding: bool = False) -> None:
        self._partial = bytearray()
        self.discarding = discarding

    def _end_line(self, first: bytes) -> list[bytes]:
        """The line that `first` (the data up to a newline) completes, if it is kept."""
        if self.discarding:
            self.discarding = False  # this newline ends the over-long line: drop it
            return []
        line = bytes(self._partial) + first if self._partial else first
        self._partial = bytearray()
        if len(line) > self.max_line_bytes:
            self.overlong_lines += 1
            return []
        return [line]

    def feed(self, data: bytes, final: bool = False) -> list[bytes]:
        """The complete lines (without newlines) that `data` finishes. The unfinished end
        waits for the next call, unless `final`: the stream ends there, so it is a line too."""
        pieces = data.split(b"\n")
        tail = pieces.pop()
        out: list[bytes] = []
        if pieces:
            out = self._end_line(pieces[0])
            middle = pieces[1:]
            if len(data) > self.max_line_bytes:  # only then can a middle piece be too long
                kept = [p for p in middle if len(p) <= self.max_line_bytes]
                self.overlong_lines += len(middle) - len(kept)
                middle = kept
            out.extend(middle)
        if not self.discarding:
            self._partial += tail
            if len(self._partial) > self.max_line_bytes:
                self.overlong_lines += 1
                self.reset(discarding=True)
        if final:
            if self._partial:
                out.append(bytes(self._partial))
            self.reset()
        return out


class LogFollower:
    """Follows one file from its end, across rotation and truncation (read-only).

    Only a regular file in the log's own directory is read (`open_log_file`); anything
    else is an `error` ("is a FIFO, not a regular file"), retried every poll."""

    def __init__(
        self,
        path: str,
        from_start: bool = False,
        max_line_bytes: int = LOG_MAX_LINE_BYTES,
        max_read_bytes: int = LOG_MAX_READ_BYTES,
        seed_bytes: int = LOG_SEED_BYTES,
        allow_symlink_out: bool = False,
        max_skip_bytes: int = LOG_MAX_SKIP_BYTES,
    ):
        self.path = path
        self.allow_symlink_out = allow_symlink_out
        self.max_read_bytes = max_read_bytes
        self.seed_bytes = seed_bytes
        self.max_skip_bytes = max_skip_bytes
        self._file: BinaryIO | None = None
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._pos = 0
        self._lines = LineSplitter(max_line_bytes)
        # the first file is joined at its end; any later one (rotated in, or created
        # after we started) is read from its start: all of it is new
        self._from_start = from_start
        self.error: str | None = None  # why the log cannot be read right now
        self.rotations = 0
        self.truncations = 0
        self.mtime: float | None = None  # of the file when last read: the time of its newest byte
        self.lag_bytes = 0  # how far our offset is behind the end of the file after a poll
        # (time seen, size) each time the file was seen larger, oldest first: when bytes
        # at an offset were there at the latest (see `written_by`)
        self._sizes: deque[tuple[float, int]] = deque(maxlen=4096)

    @property
    def overlong_lines(self) -> int:
        return self._lines.overlong_lines

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
        self._file = None
        self._ident = None

    def _open(self) -> list[str]:
        """Open the file now at `path`; returns the backlog (tail) lines on first join."""
        f = self._file = open_log_file(self.path, self.allow_symlink_out)  # kept open across polls
        st = os.fstat(f.fileno())
        self._ident = (st.st_dev, st.st_ino)
        self._lines.reset()
        self._sizes.clear()
        backlog: list[str] = []
        if self._from_start:
            self._pos = 0
        else:
            self._pos = st.st_size
            start = max(st.st_size - self.seed_bytes, 0)
            f.seek(start)
            tail = f.read(st.st_size - start)
            lines = tail.split(b"\n")
            if start > 0:
                lines = lines[1:]  # the first piece is the end of a line we did not see
            if not lines:  # no newline in the whole tail: we are inside an over-long line
                self._lines.reset(discarding=True)
                return backlog
            # a last piece without a newline is a line still being written: read it later
            self._pos = st.st_size - len(lines[-1])
            limit = self._lines.max_line_bytes
            backlog = [self._decode(b) for b in lines[:-1] if len(b) <= limit]
        self._from_start = True
        return backlog

    @staticmethod
    def _decode(raw: bytes) -> str:
        return raw.decode("utf-8", "replace").rstrip("\r")

    def _skip_overlong(self) -> None:
        """Inside an over-long line, move on to its newline reading 1 MiB at a time and
        keeping nothing: a 100 MB line costs one poll, not 25 of `max_read_bytes` each."""
        assert self._file is not None
        skipped = 0
        while skipped < self.max_skip_bytes:
            chunk = self._file.read(LOG_SKIP_CHUNK_BYTES)
            if not chunk:
                break
            end = chunk.find(b"\n")
            if end >= 0:
                self._pos += end  # the newline itself ends the line, in the splitter
                break
            self._pos += len(chunk)
            skipped += len(chunk)
        self._file.seek(self._pos)

    def _read_more(self, final: bool) -> list[str]:
        """Read on from our offset; `final`: the file will not grow (rotated away)."""
        assert self._file is not None
        self._file.seek(self._pos)
        out: list[bytes] = []
        # a read that ends inside an over-long line gets one more after the skip: the
        # lines behind a 100 MB line arrive in this poll, not the next
        for _ in range(2):
            if self._lines.discarding:
                self._skip_overlong()
            data = self._file.read(self.max_read_bytes)
            self._pos += len(data)
            at_end = self._pos >= os.fstat(self._file.fileno()).st_size
            out.extend(self._lines.feed(data, final and at_end))
            if at_end or not self._lines.discarding:
                break
        return [self._decode(raw) for raw in out]

    def _note_size(self, now: float) -> None:
        assert self._file is not None
        size = os.fstat(self._file.fileno()).st_size
        if not self._sizes or size > self._sizes[-1][1]:
            self._sizes.append((now, size))
        self.lag_bytes = max(size - self._pos, 0)

    def written_by(self, now: float) -> float:
        """When the newest byte we have read was in the file, at the latest.

        `now` while we keep up. While behind (a log growing faster than we read), the
        first time the file was seen reaching our offset: lines read now are at least
        that old, and a figure parsed from them must not look fresh.
        """
        for seen_at, size in self._sizes:
            if size >= self._pos:
                return min(seen_at, now)
        return now

    def poll(self, now: float | None = None) -> tuple[list[str], list[str]]:
        """(new complete lines, backlog lines read once when first joining the file)."""
        now = time.time() if now is None else now
        lines: list[str] = []
        backlog: list[str] = []
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
            self.error = "not found"
        except OSError as exc:
            st = None
            self.error = exc.strerror or type(exc).__name__
        try:
            if self._file is not None and st is not None and (st.st_dev, st.st_ino) != self._ident:
                # rotated: finish the old file (its last line is complete now), then switch
                lines.extend(self._read_more(final=True))
                if self._pos < os.fstat(self._file.fileno()).st_size:
                    self._note_size(now)
                    return lines, backlog  # more of the old file left: next poll
                self.close()
                self.rotations += 1
            if self._file is None:
                if st is None:
                    self._from_start = True  # a file that appears later is all new
                    return lines, backlog
                backlog = self._open()
                self._note_size(now)
            else:
                size = os.fstat(self._file.fileno()).st_size
                if size < self._pos:  # truncated in place (copytruncate)
                    self.truncations += 1
                    self._pos = 0
                    self._lines.reset()
                    self._sizes.clear()
            lines.extend(self._read_more(final=False))
            assert self._file is not None
            self._note_size(now)
            self.mtime = os.fstat(self._file.fileno()).st_mtime
            self.error = None
        except OSError as exc:
            self.error = exc.strerror or type(exc).__name__
            self.close()
        except LogRefused as exc:
            self.error = str(exc)
            self.close()
        return lines, backlog


class CommandFollower(LogFollower):
    """Follows the output of a command the user already runs for logs, e.g.
    ``["journalctl", "-u", "vllm", "-f", "-n", "0"]``: argv as given, never a shell.

    Its stdout is read without blocking each poll, split into lines like a file. If it
    exits it is started again, at most every `restart_s`. It dies with the probe (Linux
    parent-death signal), so a closed SSH session leaves no follower behind.
    """

    def __init__(self, argv: list, restart_s: float = 5.0, **kwargs: Any):
        super().__init__(" ".join(str(a) for a in argv)[:200], **kwargs)
        self.argv = [str(a) for a in argv]
        self.restart_s = restart_s
        self._proc: Any = None
        self._started_at: float | None = None

    @staticmethod
    def _die_with_parent() -> None:
        try:
            import ctypes
            import signal

            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: S110 - not Linux: the command outlives us at worst
            pass

    def _start(self) -> None:
        import subprocess

        now = time.monotonic()
        if self._started_at is not None and now - self._started_at < self.restart_s:
            return
        self._started_at = now
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                preexec_fn=self._die_with_parent,  # only a prctl: safe after fork
            )
            os.set_blocking(self._proc.stdout.fileno(), False)
            self.error = None
        except (OSError, ValueError) as exc:
            self._proc = None
            self.error = "cannot run: " + (getattr(exc, "strerror", None) or type(exc).__name__)

    def poll(self, now: float | None = None) -> tuple[list[str], list[str]]:
        if self._proc is None:
            self._start()
            if self._proc is None:
                return [], []
        raw_lines: list[bytes] = []
        got = skipped = 0
        # bounded per poll: `max_read_bytes` of lines, and `max_skip_bytes` dropped inside
        # an over-long line (cheap: nothing of it is kept); the pipe makes the command wait
        while got < self.max_read_bytes and skipped < self.max_skip_bytes:
            try:
                data = os.read(self._proc.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                self.error = exc.strerror or type(exc).__name__
                break
            if not data:  # EOF: the command ended
                raw_lines.extend(self._lines.feed(b"", final=True))
                status = self._proc.wait()
                self.error = f"command exited with status {status}"
                self._proc.stdout.close()
                self._proc = None
                break
            if self._lines.discarding and b"\n" not in data:
                skipped += len(data)
            else:
                got += len(data)
            raw_lines.extend(self._lines.feed(data))
        return [self._decode(raw) for raw in raw_lines], []

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(2)
            except Exception:
                proc.kill()
                proc.wait()
            proc.stdout.close()
