"""The viewer's side of the channel.

`SocketFeed` is a `SnapshotFeed` and a `PhaseMarkingFeed`: the TUI draws a monitor in
another process exactly as it drew one in its own. `call` and `list_monitors` are the
one-shot, blocking clients of `infertop ps`, `stop` and `phase`.

A socket that refuses connections (its monitor was killed) is stale: it is reported as
no monitor, never joined; the next monitor on the layout replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from infertop.layouts.model import Layout
from infertop.monitor.channel.paths import SOCKET_SUFFIX, reachable
from infertop.monitor.channel.protocol import (
    MAX_FRAME_BYTES,
    MAX_INTEREST_NODES,
    AskInfo,
    Info,
    MarkPhase,
    Refused,
    Reply,
    ShowInterest,
    SnapshotFrame,
    StopMonitor,
    Subscribe,
    decode_server_line,
    line,
)
from infertop.monitor.channel.server import peer_uid
from infertop.monitor.evaluation.phases import PHASES
from infertop.monitor.feeds import Publish

log = logging.getLogger(__name__)
CALL_TIMEOUT_S = 5.0


class MonitorUnavailable(Exception):
    """No monitor to talk to at a socket. `stale`: a socket file with no monitor behind it."""

    def __init__(self, message: str, stale: bool = False, exit_code: int | None = None):
        super().__init__(message)
        self.stale = stale
        self.exit_code = exit_code  # of a monitor that was started and failed


def _unavailable(path: Path, exc: OSError) -> MonitorUnavailable:
    if isinstance(exc, FileNotFoundError):
        return MonitorUnavailable(f"no monitor is running ({path} does not exist)")
    if isinstance(exc, ConnectionRefusedError):
        return MonitorUnavailable(f"no monitor is running ({path} is stale: its monitor is gone)", stale=True)
    if isinstance(exc, PermissionError):
        return MonitorUnavailable(f"{path}: permission denied (a monitor of another user?)")
    return MonitorUnavailable(f"{path}: cannot connect: {exc.strerror or exc}")


def _check_server(sock: socket.socket, path: Path) -> None:
    # a socket put there by another user (a state directory open to others) is not ours
    if peer_uid(sock) != os.getuid():
        raise MonitorUnavailable(f"{path}: the process serving it belongs to another user")


def _first_message(raw: bytes, path: Path) -> Info:
    if not raw.endswith(b"\n"):
        raise MonitorUnavailable(f"{path}: the monitor hung up")
    try:
        message = decode_server_line(raw)
    except ValueError:
        raise MonitorUnavailable(f"{path}: not an infertop monitor") from None
    if isinstance(message, Refused):
        raise MonitorUnavailable(f"{path}: refused: {message.detail}")
    if not isinstance(message, Info):
        raise MonitorUnavailable(f"{path}: not an infertop monitor")
    return message


# ----------------------------------------------------------------------- blocking


class Connection:
    """A blocking connection for one-shot commands (not subscribed: no snapshots)."""

    def __init__(self, path: Path, timeout_s: float = CALL_TIMEOUT_S):
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        try:
            with reachable(path) as name:
                self._sock.connect(name)
            _check_server(self._sock, path)
            self._file = self._sock.makefile("rb")
            self.info = _first_message(self._readline(), path)
        except OSError as exc:
            self._sock.close()
            raise _unavailable(path, exc) from None
        except BaseException:
            self._sock.close()
            raise
        self._next_id = 0

    def _readline(self) -> bytes:
        raw: bytes = self._file.readline(MAX_FRAME_BYTES + 1)
        if len(raw) > MAX_FRAME_BYTES:
            raise MonitorUnavailable(f"{self.path}: a line longer than {MAX_FRAME_BYTES} bytes")
        return raw

    def request(self, command: AskInfo | MarkPhase | StopMonitor) -> Info | Reply:
        """Send `command` and wait for its answer; MonitorUnavailable if the monitor goes."""
        self._next_id += 1
        command = command.model_copy(update={"id": self._next_id})
        try:
            self._sock.sendall(line(command))
            while True:
                raw = self._readline()
                if not raw.endswith(b"\n"):
                    raise MonitorUnavailable(f"{self.path}: the monitor hung up")
                message = decode_server_line(raw)
                if isinstance(message, Refused):
                    raise MonitorUnavailable(f"{self.path}: refused: {message.detail}")
                if isinstance(message, Info | Reply) and message.id == self._next_id:
                    return message
        except OSError as exc:
            raise MonitorUnavailable(f"{self.path}: {exc.strerror or exc}") from None
        except ValueError:
            raise MonitorUnavailable(f"{self.path}: not an infertop monitor") from None

    def wait_hangup(self, timeout_s: float) -> bool:
        """Read (and drop) until the monitor hangs up; False if it has not in `timeout_s`."""
        self._sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not self._sock.recv(65536):
                    return True
        except OSError as exc:  # a reset is a hang-up too; a timeout is not
            return not isinstance(exc, TimeoutError)
        return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(
    path: Path, command: AskInfo | MarkPhase | StopMonitor, timeout_s: float = CALL_TIMEOUT_S
) -> Info | Reply:
    """One command to the monitor at `path`. MonitorUnavailable when there is none."""
    with Connection(path, timeout_s) as conn:
        return conn.request(command)


def list_monitors(directory: Path) -> list[tuple[Path, Info | MonitorUnavailable]]:
    """Every monitor socket in `directory`: its monitor's info, or why there is none."""
    found: list[tuple[Path, Info | MonitorUnavailable]] = []
    try:
        paths = sorted(p for p in directory.iterdir() if p.name.endswith(SOCKET_SUFFIX))
    except OSError:
        return found
    for path in paths:
        try:
            with Connection(path, timeout_s=2.0) as conn:
                found.append((path, conn.info))
        except MonitorUnavailable as exc:
            found.append((path, exc))
    return found


# ----------------------------------------------------------------------- the feed


class SocketFeed:
    """Snapshots from a monitor in another process, over its socket.

    When the monitor cannot be reached, or goes away (stopped, killed), `ended()` returns
    why: the viewer leaves rather than show the last frame as live.
    """

    def __init__(self, layout: Layout, path: Path):
        self.layout = layout
        self.path = path
        self.info: Info | None = None
        self.frames = 0
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()
        self.end_reason: str | None = None  # why the feed ended (None: it has not)
        self._next_id = 0

    async def start(self, publish: Publish) -> None:
        """Attach and subscribe. Returns promptly: when no monitor answers, the feed has
        ended at once (`ended()` says why) rather than raise into the viewer's start-up."""
        if self._writer is not None or self._ended.is_set():
            return
        try:
            await self.connect(publish)
        except MonitorUnavailable as exc:
            self._end(str(exc))

    async def connect(self, publish: Publish) -> None:
        """`start`, raising MonitorUnavailable when no monitor answers."""
        try:
            with reachable(self.path) as name:
                reader, writer = await asyncio.open_unix_connection(name, limit=MAX_FRAME_BYTES)
        except OSError as exc:
            raise _unavailable(self.path, exc) from None
        try:
            _check_server(writer.get_extra_info("socket"), self.path)
            async with asyncio.timeout(CALL_TIMEOUT_S):
                self.info = _first_message(await reader.readline(), self.path)
            writer.write(line(Subscribe()))
        except TimeoutError:
            writer.close()
            why = f"the monitor did not answer in {CALL_TIMEOUT_S:g} s"
            raise MonitorUnavailable(f"{self.path}: {why}") from None
        except BaseException:
            writer.close()
            raise
        self._writer = writer
        self._reading = asyncio.create_task(self._read(reader, publish), name="channel:feed")

    def _end(self, reason: str) -> None:
        self.end_reason = reason
        self._ended.set()

    async def _read(self, reader: asyncio.StreamReader, publish: Publish) -> None:
        reason = "the monitor stopped"
        try:
            while True:
                raw = await reader.readline()
                if not raw.endswith(b"\n"):
                    break
                try:
                    message = decode_server_line(raw)
                except ValueError as exc:
                    log.warning("a line from the monitor could not be read: %s", str(exc).splitlines()[0])
                    continue
                if isinstance(message, SnapshotFrame):
                    self.frames += 1
                    publish(message.snapshot)
                elif isinstance(message, Reply) and not message.ok:
                    log.warning("the monitor refused a command: %s", message.detail)
                elif isinstance(message, Refused):
                    reason = f"the monitor hung up: {message.detail}"
                    break
        except ValueError:  # a line over MAX_FRAME_BYTES
            reason = f"the monitor sent a line longer than {MAX_FRAME_BYTES} bytes"
        except (ConnectionError, OSError) as exc:
            reason = f"the connection to the monitor broke: {exc}"
        self._end(reason)

    async def ended(self) -> str:
        """Wait until the monitor is gone (or was never reached); why."""
        await self._ended.wait()
        return self.end_reason or ""

    def _send(self, command: MarkPhase | StopMonitor | ShowInterest) -> None:
        if self._writer is None or self._writer.is_closing():
            raise ValueError("not connected to the monitor")
        self._next_id += 1
        self._writer.write(line(command.model_copy(update={"id": self._next_id})))

    def mark_phase(self, phase: str) -> None:
        """Ask the monitor to count spend from now on to `phase` (its next frame shows it).
        ValueError for a name that is not a phase."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
        self._send(MarkPhase(phase=phase))

    def show_interest(self, nodes: Sequence[str]) -> None:
        """Tell the monitor which nodes this viewer shows now (a hint: no reply; dropped
        while not connected)."""
        with contextlib.suppress(ValueError):
            self._send(ShowInterest(nodes=list(nodes)[:MAX_INTEREST_NODES]))

    def stop_monitor(self) -> None:
        """Ask the monitor itself to stop (its record closes)."""
        self._send(StopMonitor())

    async def stop(self) -> None:
        """Detach: the monitor goes on. Safe to call twice."""
        writer, self._writer = self._writer, None
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
            self._reading = None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
