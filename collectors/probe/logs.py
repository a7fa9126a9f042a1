"""Engine figures from an engine's log: follow the file, parse the lines we know.

Standard library only: this module is bundled into the probe that runs on the node
(`collectors/probe/bundle.py`), and the local source imports it directly. It never
writes, and nothing from the log leaves the node except the parsed numbers.

Three parts, each small:

* `LogFollower` follows one file the way `tail -F` does: it starts at the end (a
  days-long log is not re-read), survives rotation (a new file under the same name: the
  old one is read to its end first, then the new one from its start) and truncation
  (`copytruncate`: the size drops below our offset, so we start again at 0), holds a
  partial last line back until its newline arrives, and bounds both the bytes read per
  poll and the length of a line (an over-long line is dropped and counted).
* Parsers turn lines into figures, field by field, never by matching a whole line, so
  that older and newer engine versions (which add or drop fields) both parse:
  - vLLM's periodic stats line, e.g.
    ``Engine 000: Avg prompt throughput: 93.9 tokens/s, Avg generation throughput:
    13.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%,
    Prefix cache hit rate: 0.0%`` (and the V0 form with ``Swapped``/``Pending``);
  - vLLM's speculative-decoding line, e.g. ``SpecDecoding metrics: Mean acceptance
    length: 3.49, Accepted throughput: …, Accepted: 92 tokens, Drafted: 259 tokens,
    Per-position acceptance rate: 0.757, …, Avg Draft acceptance rate: 35.5%`` and its
    older shapes (``Draft acceptance rate … Accepted … Drafted``; ``Mean acceptance
    length`` + per-position rates only; V0's cumulative ``Speculative metrics: …
    Number of accepted tokens: N, Number of draft tokens: M``);
  - user patterns from the layout (named regex groups → canonical quantities).
* `LogFigures` accumulates per-interval figures into counters, so that the same
  reset-aware rate logic that serves metrics endpoints applies to logs.

How the counters are derived (each log line covers the interval since the previous one):

* generation / prompt tokens: vLLM prints throughput = tokens in the interval ÷ the
  interval, so tokens = throughput × interval. The interval is the engine's
  ``--log-stats-interval`` (10 s by default), learnt as the median gap between an
  engine's consecutive stats lines (their ``MM-DD hh:mm:ss`` stamps), because vLLM
  stops printing while idle and the first line after a pause still covers one interval
  only. A layout may state it (`interval_s`) instead.
* accepted / draft tokens: the line's ``Accepted: N`` / ``Drafted: M`` counts are added.
* drafts: vLLM defines mean acceptance length = 1 + accepted ÷ drafts, so drafts =
  accepted ÷ (mean length − 1). The printed length has two decimals; when the number of
  speculative positions k is known (the per-position list has k entries) and Drafted ÷ k
  agrees with that estimate within its rounding error, the exact Drafted ÷ k is used.
  With nothing accepted (length 1.00 or nan), drafts = Drafted ÷ k.
* the shortest old line (mean length and per-position rates, no counts): the tokens the
  engine generated in the same interval G come from the stats line just before it; each
  speculative step emits mean-length tokens, so drafts ≈ G ÷ mean length, accepted ≈
  drafts × (length − 1), draft tokens ≈ drafts × k. Approximate: it assumes every token
  came from a speculative step. A note says so.
* V0's ``Speculative metrics`` counts are cumulative already: they are taken as counters.

Malformed lines — a stats line whose fields do not parse, values out of range,
accepted > drafted, over-long lines, a user pattern whose group is not a number — are
counted (`log_lines_skipped_total`) and skipped. Nothing in here raises on input.
"""

from __future__ import annotations

import math
import os
import re
import stat
import time
from collections import deque
from typing import Any, BinaryIO

# The names a log pattern may use, shared with the layout that names them; the SSH bundle
# pastes that file's text above this one instead.
# bundle: strip-begin
from layouts.log_vocabulary import (
    LOG_GAUGE_QUANTITIES,
    LOG_PATTERN_KINDS,
    LOG_QUANTITIES,
)

# bundle: strip-end

LOG_MAX_LINE_BYTES = 64 * 1024  # a stats line is ~400 bytes; longer is not ours
LOG_MAX_READ_BYTES = 4 * 1024 * 1024  # per poll: a burst is read over several polls
LOG_SEED_BYTES = 64 * 1024  # tail read at start, to know the last gauges and interval
# per poll, scanned and dropped (never kept) to find the end of an over-long line
LOG_MAX_SKIP_BYTES = 512 * 1024 * 1024
LOG_SKIP_CHUNK_BYTES = 1024 * 1024
LOG_LAG_NOTE_BYTES = 1024 * 1024  # further behind the end of the file than this: a note says so
LOG_DEFAULT_INTERVAL_S = 10.0  # vLLM's --log-stats-interval default

_LOG_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_LOG_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_LOG_STAMP = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")


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


# ---------------------------------------------------------------------------- parsing


class LogLineError(ValueError):
    """A line that looks like one of ours but does not parse: counted and skipped."""


def _log_num(match, group: int = 1):
    if match is None:
        return None
    value = float(match.group(group))
    return value if math.isfinite(value) else None


def _log_check(value, low: float, high: float, what: str):
    if value is not None and not low <= value <= high:
        raise LogLineError(f"{what} out of range")
    return value


def _log_stamp_s(text: str):
    """Seconds since a fixed origin of a vLLM ``MM-DD hh:mm:ss`` stamp, or None.

    The stamp carries no year and no zone; only differences between stamps of one log are
    used (to learn the stats interval), so neither matters.
    """
    m = _LOG_STAMP.search(text)
    if m is None:
        return None
    month, day, hour, minute, second = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    days_before = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)
    return (((days_before[month - 1] + day) * 24 + hour) * 60 + minute) * 60 + second


class VllmParser:
    """vLLM-style stats and speculative-decoding lines, matched field by field."""

    name = "vllm"

    _STATS_MARK = re.compile(r"Avg (?:prompt|generation) throughput:")
    _ENGINE = re.compile(r"\bEngine (\d{1,6}):")
    _PROMPT = re.compile(r"Avg prompt throughput: " + _LOG_NUM + r" tokens/s")
    _GEN = re.compile(r"Avg generation throughput: " + _LOG_NUM + r" tokens/s")
    _RUNNING = re.compile(r"\bRunning: (\d+) reqs")
    _WAITING = re.compile(r"\b(?:Waiting|Pending): (\d+) reqs")
    # "%s KV cache usage": GPU on CUDA, else the device type in capitals (NPU under
    # vLLM-Ascend, XPU, CPU); very old lines print no device
    _KV = re.compile(r"(?:\b[A-Z]{2,8} |(?<![A-Za-z] ))KV cache usage: " + _LOG_NUM + "%")
    # --enable-logging-iteration-details: one line per engine step (vLLM 0.33 loggers.py)
    _ITERATION = re.compile(r"\bIteration\((\d+)\): \d+ context requests")

    _SPEC_MARK = re.compile(r"\b(?:SpecDecoding|Speculative) metrics:")
    _MEAN_LEN = re.compile(r"Mean acceptance length: " + _LOG_NUM)
    _ACCEPTED = re.compile(r"\bAccepted: (\d+) tokens")
    _DRAFTED = re.compile(r"\bDrafted: (\d+) tokens")
    _PER_POS = re.compile(r"Per-position acceptance rate: ([0-9.,\s]+)")
    _V0_K = re.compile(r"Number of speculative tokens: (\d+)")
    _V0_ACCEPTED = re.compile(r"Number of accepted tokens: (\d+)")
    _V0_DRAFT = re.compile(r"Number of draft tokens: (\d+)")

    def parse(self, text: str, figures: LogFigures) -> bool:
        if self._STATS_MARK.search(text):
            self._stats(text, figures)
            return True
        if self._SPEC_MARK.search(text):
            self._spec(text, figures)
            return True
        if self._ITERATION.search(text):
            self._iteration(text, figures)
            return True
        return False

    def _iteration(self, text: str, figures: LogFigures) -> None:
        """One engine step. Every DP engine prints its own (idle ones their dummy steps,
        taken in lockstep), so each line counts 1 / engines: the node's decode steps are
        one engine's. Tokens are left to the stats line (counting both would double)."""
        engine_m = self._ENGINE.search(text)
        engine = engine_m.group(1) if engine_m else "-"
        figures.add_steps(engine, 1.0)
        kv_pct = _log_check(_log_num(self._KV.search(text)), 0, 100.5, "KV cache usage")
        if kv_pct is not None:
            figures.engine_gauges.setdefault(engine, {})["kv_cache_usage"] = min(kv_pct / 100.0, 1.0)

    def _stats(self, text: str, figures: LogFigures) -> None:
        engine_m = self._ENGINE.search(text)
        engine = engine_m.group(1) if engine_m else "-"
        prompt_tps = _log_check(_log_num(self._PROMPT.search(text)), 0, 1e9, "prompt throughput")
        gen_tps = _log_check(_log_num(self._GEN.search(text)), 0, 1e9, "generation throughput")
        running = _log_check(_log_num(self._RUNNING.search(text)), 0, 1e7, "running")
        waiting = _log_check(_log_num(self._WAITING.search(text)), 0, 1e8, "waiting")
        kv_pct = _log_check(_log_num(self._KV.search(text)), 0, 100.5, "KV cache usage")
        if prompt_tps is None and gen_tps is None:
            raise LogLineError("stats line without a throughput figure")
        interval = figures.stats_interval(engine, _log_stamp_s(text))
        figures.cover(engine, interval, figures.last_gap)
        if prompt_tps is not None:
            figures.add("prompt_tokens", prompt_tps * interval)
        gen_tokens = None
        if gen_tps is not None:
            gen_tokens = gen_tps * interval
            figures.add("generation_tokens", gen_tokens)
        figures.pending_generation_tokens = gen_tokens
        gauges = figures.engine_gauges.setdefault(engine, {})
        if running is not None:
            gauges["requests_running"] = running
        if waiting is not None:
            gauges["requests_waiting"] = waiting
        if kv_pct is not None:
            gauges["kv_cache_usage"] = min(kv_pct / 100.0, 1.0)

    def _spec(self, text: str, figures: LogFigures) -> None:
        v0_accepted = self._V0_ACCEPTED.search(text)
        if v0_accepted is not None:
            self._spec_v0(text, figures, int(v0_accepted.group(1)))
            return
        mean_len = _log_check(_log_num(self._MEAN_LEN.search(text)), 1, 1e4, "mean acceptance length")
        accepted_m = self._ACCEPTED.search(text)
        drafted_m = self._DRAFTED.search(text)
        rates = self._per_position(text)
        if rates:
            figures.spec_positions = len(rates)
        k = figures.spec_positions
        if accepted_m is None or drafted_m is None:
            # the shortest old shape: ratios only; scale them by the interval's tokens
            gen = figures.pending_generation_tokens
            if mean_len is None:
                raise LogLineError("speculative line without counts or mean length")
            figures.pending_generation_tokens = None
            if gen is None or not k:
                return  # nothing to scale by: a valid line that yields no counters
            drafts = gen / mean_len
            figures.add("drafts", drafts)
            figures.add("accepted_tokens", drafts * (mean_len - 1))
            figures.add("draft_tokens", drafts * k)
            figures.notes.add("draft counts derived from mean acceptance length (approximate)")
            return
        accepted = int(accepted_m.group(1))
        drafted = int(drafted_m.group(1))
        if accepted > drafted:
            raise LogLineError("accepted more tokens than drafted")
        figures.add("accepted_tokens", accepted)
        figures.add("draft_tokens", drafted)
        drafts = self._drafts(accepted, drafted, mean_len, k)
        if drafts is not None:
            figures.add("drafts", drafts)
        figures.pending_generation_tokens = None

    @staticmethod
    def _drafts(accepted: int, drafted: int, mean_len, k):
        if accepted > 0 and mean_len is not None and mean_len > 1:
            estimate = accepted / (mean_len - 1)
            if k:
                # the length is printed to ±0.005: how far that moves the estimate
                tolerance = 0.005 * accepted / (mean_len - 1) ** 2 + 1
                if abs(drafted / k - estimate) <= tolerance:
                    return drafted / k
            return float(round(estimate))
        if accepted == 0 and k:
            return drafted / k
        if drafted == 0:
            return 0.0
        return None

    def _per_position(self, text: str) -> list:
        m = self._PER_POS.search(text)
        if m is None:
            return []
        rates = []
        for piece in m.group(1).split(","):
            piece = piece.strip()
            if not piece:
                break
            try:
                value = float(piece)
            except ValueError:
                break
            if not 0 <= value <= 1:
                raise LogLineError("per-position rate out of range")
            rates.append(value)
        return rates[:64]

    def _spec_v0(self, text: str, figures: LogFigures, accepted: int) -> None:
        draft_m = self._V0_DRAFT.search(text)
        k_m = self._V0_K.search(text)
        if draft_m is None:
            raise LogLineError("V0 speculative line without draft tokens")
        drafted = int(draft_m.group(1))
        if accepted > drafted:
            raise LogLineError("accepted more tokens than drafted")
        # V0 prints totals since the engine started: they are counters already
        figures.set_counter("accepted_tokens", accepted)
        figures.set_counter("draft_tokens", drafted)
        k = int(k_m.group(1)) if k_m else 0
        if k > 0:
            figures.spec_positions = k
            figures.set_counter("drafts", drafted / k)


_SGLANG_STAMP = re.compile(r"\b(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\b")


class SglangParser:
    """SGLang's scheduler line, printed every `--decode-log-interval` decode passes (40 by
    default) by each DP rank's logging scheduler (SGLang 0.5.23 metrics_reporter.py):

    ``[2026-11-30 10:00:01 DP3 TP3 EP3] Decode batch, #running-req: 48, #token: 9120,
    token usage: 0.41, accept len: 3.21, accept rate: 0.74, cuda graph: True,
    gen throughput (token/s): 4567.89, #queue-req: 2``

    Steps: the interval's passes, counted 1 / engines per engine line (the node's decode
    steps are one engine's). Tokens: throughput × the time since that engine's previous
    line (its stamps; to the millisecond with SGLANG_LOG_MS). Speculative counts from the
    interval's tokens G, accept len L and rate r: drafts = G ÷ L, accepted = drafts ×
    (L − 1), draft tokens = accepted ÷ r, so the derived acceptance and length are L and r.
    """

    name = "sglang"
    decode_log_interval = 40

    _MARK = re.compile(r"\bDecode batch\b")
    _DP = re.compile(r"\bDP(\d{1,6})\b")
    _RUNNING = re.compile(r"#running-req: (\d+)")
    _QUEUE = re.compile(r"#queue-req: (\d+)")
    _USAGE = re.compile(r"(?<![a-z] )(?<!swa )\btoken usage: " + _LOG_NUM)
    _ACCEPT_LEN = re.compile(r"\baccept len: " + _LOG_NUM)
    _ACCEPT_RATE = re.compile(r"\baccept rate: " + _LOG_NUM)
    _GEN = re.compile(r"gen throughput \(token/s\): " + _LOG_NUM)

    def __init__(self, decode_passes=None) -> None:
        if decode_passes:
            self.decode_log_interval = int(decode_passes)
        self._last: dict[str, float] = {}  # engine → stamp of its previous line
        self._gaps: list[float] = []

    @staticmethod
    def _stamp(text: str):
        m = _SGLANG_STAMP.search(text)
        if m is None:
            return None
        whole = _log_stamp_s(f"{m.group(2)}-{m.group(3)} {m.group(4)}:{m.group(5)}:{m.group(6)}")
        if whole is None:
            return None
        frac = m.group(7)
        return whole + (int(frac) / 10 ** len(frac) if frac else 0.0)

    def _gap(self, engine: str, stamp) -> float | None:
        if stamp is None:
            return None
        prev = self._last.get(engine)
        self._last[engine] = stamp
        if prev is not None and 0 < stamp - prev <= 600:
            self._gaps = [*self._gaps, stamp - prev][-9:]
            return stamp - prev
        return None

    def parse(self, text: str, figures: LogFigures) -> bool:
        if not self._MARK.search(text):
            return False
        dp = self._DP.search(text)
        engine = "dp" + dp.group(1) if dp else "-"
        running = _log_check(_log_num(self._RUNNING.search(text)), 0, 1e7, "running")
        waiting = _log_check(_log_num(self._QUEUE.search(text)), 0, 1e8, "queue")
        usage = _log_check(_log_num(self._USAGE.search(text)), 0, 1.005, "token usage")
        gen_tps = _log_check(_log_num(self._GEN.search(text)), 0, 1e9, "gen throughput")
        length = _log_check(_log_num(self._ACCEPT_LEN.search(text)), 0, 1e4, "accept len")
        rate = _log_check(_log_num(self._ACCEPT_RATE.search(text)), 0, 1.005, "accept rate")
        if gen_tps is None and running is None:
            raise LogLineError("decode line without running requests or throughput")
        figures.add_steps(engine, self.decode_log_interval)
        gap = self._gap(engine, self._stamp(text))
        gauges = figures.engine_gauges.setdefault(engine, {})
        if running is not None:
            gauges["requests_running"] = running
        if waiting is not None:
            gauges["requests_waiting"] = waiting
        if usage is not None:
            gauges["kv_cache_usage"] = min(usage, 1.0)
        if gen_tps is None or gap is None:
            return True  # an engine's first line: the time it covers is not known yet
        tokens = gen_tps * gap
        figures.add("generation_tokens", tokens)
        figures.cover(engine, gap, gap)
        if length is not None and length >= 1 and tokens > 0:
            drafts = tokens / length
            accepted = drafts * (length - 1)
            figures.add("drafts", drafts)
            figures.add("accepted_tokens", accepted)
            if rate:
                figures.add("draft_tokens", accepted / rate)
        return True


class PatternParser:
    """User patterns: regexes whose named groups are canonical quantities.

    Each entry: `regex`; `field` (the quantity, or None to take every named group whose
    name is a quantity); `kind`: ``counter`` (a cumulative total as printed), ``count``
    (a per-line count, accumulated), ``rate`` (a per-second figure over the log
    interval, × interval then accumulated) or ``gauge``; `scale` multiplies the value
    (e.g. 0.01 for a percentage). With `field` set, the value is the group named after
    the field, else the group ``value``, else the only group.
    """

    def __init__(self, name: str, entries: list):
        self.name = name
        self.entries = []
        for entry in entries:
            regex = re.compile(str(entry["regex"]))
            field = entry.get("field")
            kind = entry.get("kind") or "count"
            if kind not in LOG_PATTERN_KINDS:
                raise ValueError(f"kind {kind!r} is not one of {', '.join(LOG_PATTERN_KINDS)}")
            if field is not None and field not in LOG_QUANTITIES:
                raise ValueError(f"field {field!r} is not a canonical quantity")
            scale = float(entry.get("scale", 1.0))
            self.entries.append((regex, field, kind, scale))

    @staticmethod
    def _targets(regex, field, m) -> list:
        if field is None:
            return [(name, value) for name, value in m.groupdict().items() if name in LOG_QUANTITIES]
        groups = m.groupdict()
        if field in groups:
            return [(field, groups[field])]
        if "value" in groups:
            return [(field, groups["value"])]
        if regex.groups == 1:
            return [(field, m.group(1))]
        return []

    def parse(self, text: str, figures: LogFigures) -> bool:
        values = []  # (quantity, kind, value, pattern index)
        for index, (regex, field, kind, scale) in enumerate(self.entries):
            m = regex.search(text)
            if m is None:
                continue
            for quantity, raw in self._targets(regex, field, m):
                if raw is None:
                    continue  # an optional group that did not take part
                try:
                    value = float(raw.replace(",", "")) * scale
                except (ValueError, AttributeError):
                    raise LogLineError(f"pattern group {quantity} is not a number") from None
                if not math.isfinite(value) or value < 0:
                    raise LogLineError(f"pattern group {quantity} out of range")
                values.append((quantity, kind, value, index))
        if not values:
            return False
        got = {q: (k, v, i) for q, k, v, i in values}
        # helpers: drafts from mean acceptance length, draft tokens from acceptance rate
        accepted = got.get("accepted_tokens")
        mean_len = got.pop("mean_acceptance_length", None)
        acceptance = got.pop("draft_acceptance", None)
        if accepted is not None and mean_len is not None and "drafts" not in got and mean_len[1] > 1:
            got["drafts"] = (accepted[0], accepted[1] / (mean_len[1] - 1), accepted[2])
        if accepted is not None and acceptance is not None and "draft_tokens" not in got:
            rate = acceptance[1] / 100.0 if acceptance[1] > 1 else acceptance[1]  # % or 0–1
            if rate > 0:
                got["draft_tokens"] = (accepted[0], accepted[1] / rate, accepted[2])
        for quantity, (kind, value, index) in got.items():
            if quantity in LOG_GAUGE_QUANTITIES:
                if quantity == "kv_cache_usage" and value > 1:
                    value = value / 100.0  # printed as a percentage
                figures.engine_gauges.setdefault("-", {})[quantity] = value
            elif kind == "gauge" or kind == "counter":
                figures.set_counter(quantity, value)
            elif kind == "rate":
                figures.add(quantity, value * figures.pattern_interval((self.name, index)))
            else:
                figures.add(quantity, value)
        return True


# DeepInfer's offline example (examples/offline_inference.py) prints output-token counts,
# draft acceptance and decode perplexity, in no documented format. This set is a starting
# point: check each regex against your own log and copy the set into the layout's
# [log_patterns] under a new name to adjust it.
DEEPINFER_OFFLINE_PATTERNS = [
    {
        "regex": r"(?i)\b(?:num(?:ber of)? )?output[ _]tokens?\s*[:=]\s*(?P<generation_tokens>\d+)",
        "kind": "count",
    },
    {
        "regex": r"(?i)\baccepted[ _]tokens?\s*[:=]\s*(?P<accepted_tokens>\d+)",
        "kind": "count",
    },
    {
        "regex": r"(?i)\bdraft[ _]tokens?\s*[:=]\s*(?P<draft_tokens>\d+)",
        "kind": "count",
    },
    {
        "regex": r"(?i)\b(?:draft )?acceptance(?: rate)?\s*[:=]\s*(?P<draft_acceptance>[\d.]+)\s*%?",
        "kind": "gauge",
    },
    {
        "regex": r"(?i)\bmean acceptance length\s*[:=]\s*(?P<mean_acceptance_length>[\d.]+)",
        "kind": "gauge",
    },
    {
        "regex": r"(?i)\bthroughput\s*[:=]\s*(?P<generation_tokens>[\d.]+)\s*tok(?:en)?s?/s",
        "kind": "rate",
    },
]


def _log_parser(name: str, user_sets: dict, decode_passes=None):
    if name in user_sets:
        return PatternParser(name, user_sets[name])
    if name == "vllm":
        return VllmParser()
    if name == "sglang":
        return SglangParser(decode_passes)
    if name == "deepinfer-offline":
        return PatternParser(name, DEEPINFER_OFFLINE_PATTERNS)
    raise ValueError(f"unknown log pattern set {name!r}")


# ---------------------------------------------------------------------------- figures


class LogFigures:
    """Counters and gauges accumulated from parsed lines; `engine()` is the reading."""

    def __init__(self, parsers: list, interval_s=None):
        self.parsers = parsers
        self.fixed_interval_s = interval_s
        self.counters: dict[str, float] = {}  # quantity → cumulative value
        self.engine_gauges: dict[str, dict[str, float]] = {}  # engine id → {gauge: value}
        self.lines_parsed = 0
        self.lines_skipped = 0
        self.last_line_at: float | None = None
        self.spec_positions = 0  # k, speculative tokens per draft, once known
        self.pending_generation_tokens: float | None = None  # of the latest stats line, for old spec lines
        self.step_engines: set[str] = set()  # engines whose step lines were seen
        self.engine_steps: dict[str, float] = {}  # engine → its steps (lines × passes each)
        self.notes: set[str] = set()
        self.last_gap: float | None = None  # stamp gap before the latest stats line (s)
        self._engine_clock: dict[str, float] = {}  # engine → seconds its lines cover
        self._stamps: dict[str, int] = {}  # engine → last stamp (s)
        self._gaps: list[int] = []  # recent gaps between consecutive stats lines (s)
        self._pattern_seen: dict[tuple[str, int], float] = {}  # entry → its last match time

    # -- used by parsers

    def add(self, quantity: str, amount: float) -> None:
        self.counters[quantity] = self.counters.get(quantity, 0.0) + amount

    def add_steps(self, engine: str, steps: float) -> None:
        """Steps of one engine: counted for it, and as 1 / engines of the node's mean."""
        self.step_engines.add(engine)
        self.engine_steps[engine] = self.engine_steps.get(engine, 0.0) + steps
        self.add("steps", steps / len(self.step_engines))

    def set_counter(self, quantity: str, value: float) -> None:
        self.counters[quantity] = float(value)

    def stats_interval(self, engine: str, stamp) -> float:
        """The interval one stats line covers: stated, else learnt from stamps."""
        self.last_gap = None
        if stamp is not None:
            prev = self._stamps.get(engine)
            self._stamps[engine] = stamp
            if prev is not None and 0 < stamp - prev <= 3600:
                self.last_gap = stamp - prev
                self._gaps = [*self._gaps, stamp - prev][-9:]
        if self.fixed_interval_s:
            return float(self.fixed_interval_s)
        if self._gaps:
            return float(sorted(self._gaps)[len(self._gaps) // 2])
        return LOG_DEFAULT_INTERVAL_S

    def cover(self, engine: str, interval: float, gap) -> None:
        """The log's own clock (`log_stats_seconds`): each engine's throughput line covers
        its interval on that engine's clock, and the node's clock is the furthest of them
        (DP engines print in step; one that idles prints nothing and must not slow it). A
        stamp gap far past the interval (vLLM prints no line while idle: its lines of zeros
        go to debug) adds the silence, at zero throughput — stamps are whole seconds, so
        only a gap over twice the interval plus 1 s."""
        seconds = gap if gap is not None and gap > 2 * interval + 1 else interval
        clock = self._engine_clock.get(engine, 0.0) + seconds
        self._engine_clock[engine] = clock
        self.set_counter("log_stats_seconds", max(self._engine_clock.values()))

    def pattern_interval(self, key) -> float:
        if self.fixed_interval_s:
            return float(self.fixed_interval_s)
        now = self._now
        prev = self._pattern_seen.get(key)
        self._pattern_seen[key] = now
        if prev is None or not 0 < now - prev <= 3600:
            return LOG_DEFAULT_INTERVAL_S
        return now - prev

    # -- feeding

    _now = 0.0

    def feed(self, line: str, seen_at: float) -> None:
        """One log line, read at `seen_at` (node clock). Never raises on its content."""
        self._now = seen_at
        text = _LOG_ANSI.sub("", line) if "\x1b" in line else line
        matched = False
        for parser in self.parsers:
            try:
                matched = parser.parse(text, self) or matched
            except (LogLineError, ValueError, OverflowError, IndexError, TypeError, re.error):
                self.lines_skipped += 1
                return
        if matched:
            self.lines_parsed += 1
            self.last_line_at = seen_at

    def engine(self, source_profile: str) -> dict:
        """The figures in `EngineSample` field names (counters get `_total`)."""
        out: dict[str, Any] = {"source": "log", "profile": source_profile}
        for quantity, value in self.counters.items():
            out[quantity + "_total"] = value
        for gauge in LOG_GAUGE_QUANTITIES:
            values = [g[gauge] for g in self.engine_gauges.values() if gauge in g]
            if values:
                # one line per data-parallel engine: queues add up, KV usage is a mean
                out[gauge] = sum(values) / len(values) if gauge == "kv_cache_usage" else sum(values)
        if self.engine_steps:
            out["steps_by_engine_total"] = dict(self.engine_steps)
        out["log_last_line_at"] = self.last_line_at
        out["log_lines_skipped_total"] = self.lines_skipped
        return out


class LogWatch:
    """One engine log: a follower plus the figures parsed from it.

    `config` (JSON-able, built from the layout by the non-probe side): ``path`` (a
    file) or ``command`` (an argv whose output is the log); ``pattern_sets`` (names,
    default ``["vllm"]``); ``user_patterns`` (name → list of entries, see
    `PatternParser`); ``interval_s`` (the engine's stats interval, optional);
    ``follow_symlink_out`` (read the file even if it resolves outside its directory);
    ``decode_passes`` (SGLang's --decode-log-interval, 40 if unset).
    """

    def __init__(self, config: dict):
        command = config.get("command")
        self.path = str(config.get("path") or "")
        names = list(config.get("pattern_sets") or ["vllm"])
        user_sets = dict(config.get("user_patterns") or {})
        self.profile = "+".join(names)
        self.figures = LogFigures(
            [_log_parser(name, user_sets, config.get("decode_passes")) for name in names],
            config.get("interval_s"),
        )
        self.follower: LogFollower
        if command:
            self.follower = CommandFollower(list(command))
            self.path = self.follower.path
        else:
            self.follower = LogFollower(
                self.path, from_start=bool(config.get("from_start")),
                allow_symlink_out=bool(config.get("follow_symlink_out")),
            )

    def read(self, now=None) -> tuple:
        """(engine reading dict, notes). Call once per probe interval."""
        now = time.time() if now is None else now
        follower = self.follower
        lines, backlog = follower.poll(now)
        if backlog:
            # lines that were there before we joined: their time is at most the file's
            # mtime; they give the gauges and the interval, their counts a baseline
            seen = min(follower.mtime or now, now)
            for line in backlog:
                self.figures.feed(line, seen)
        # while we are behind the end of the file, what we read now was written earlier
        written = follower.written_by(now)
        for line in lines:
            self.figures.feed(line, written)
        notes = ["engine log: " + note for note in sorted(self.figures.notes)]
        if follower.error:
            notes.append(f"engine log {self.path[-120:]}: {follower.error}")
        if follower.lag_bytes > LOG_LAG_NOTE_BYTES:
            notes.append(
                f"engine log {self.path[-120:]}: {follower.lag_bytes / 1e6:.1f} MB behind the end "
                f"of the file; its figures are from lines written {now - written:.0f} s ago or earlier"
            )
        engine = self.figures.engine(self.profile)
        engine["log_lines_skipped_total"] = self.figures.lines_skipped + self.follower.overlong_lines
        return engine, notes

    def close(self) -> None:
        self.follower.close()
