"""The monitor's side of the channel: a Unix socket that viewers attach to.

Latest wins: each viewer has one slot for the newest frame and one task that writes it
and waits for the socket to drain. A slow viewer skips frames (the slot is overwritten);
it never grows a queue and never slows the tick, which only encodes the snapshot once and
fills the slots. Only the monitor's own user may connect: the socket is 0600 in the 0700
state directory, and every connection's peer uid (SO_PEERCRED) is checked as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from infertop.monitor.channel.paths import private_state_dir, reachable
from infertop.monitor.channel.protocol import (
    MAX_COMMAND_BYTES,
    AskInfo,
    Info,
    MarkPhase,
    Refused,
    Reply,
    ShowInterest,
    StopMonitor,
    Subscribe,
    decode_command,
    encode_snapshot,
    line,
    snapshot_line,
)
from infertop.monitor.snapshot import Snapshot

if TYPE_CHECKING:  # the monitor's clients import this module for peer_uid, not the monitor
    from infertop.monitor.monitor import Monitor

log = logging.getLogger(__name__)
SOCKET_MODE = 0o600
CLOSE_TIMEOUT_S = 0.5


class ChannelError(Exception):
    """The socket cannot be served. `str()` is one line for the user."""


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


class _Viewer:
    """One connection: its newest undelivered frame and the task that delivers it."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.subscribed = False
        self.frames_skipped = 0
        self.in_view: frozenset[str] = frozenset()  # the nodes it shows (its `interest` hint)
        self._pending: bytes | None = None
        self._ready = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None

    def subscribe(self) -> None:
        if not self.subscribed:
            self.subscribed = True
            self._pump = asyncio.create_task(self._deliver(), name="channel:viewer")

    def offer(self, frame: bytes) -> None:
        if self._pending is not None:
            self.frames_skipped += 1
        self._pending = frame
        self._ready.set()

    def send(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    async def _deliver(self) -> None:
        try:
            while True:
                await self._ready.wait()
                self._ready.clear()
                frame, self._pending = self._pending, None
                if frame is None or self.writer.is_closing():
                    continue
                self.writer.write(frame)
                await self.writer.drain()  # the viewer's pace; meanwhile the slot is overwritten
        except (ConnectionError, OSError):
            pass  # the viewer went away: its reading side ends the connection

    def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()


class ChannelServer:
    """Serves `monitor`'s snapshots and takes commands on the Unix socket at `path`.

    The caller holds the layout's MonitorLock: whatever socket file is at `path` was left
    by a dead monitor and is replaced. `on_stop` is called when a viewer asks the monitor
    to stop (the command then stops the monitor, which closes the record).
    """

    def __init__(
        self,
        monitor: Monitor,
        path: Path,
        layout_file: str | None,
        on_stop: Callable[[], None],
        started_at: float | None = None,
    ):
        self.monitor = monitor
        self.path = path
        self.layout_file = layout_file
        self.on_stop = on_stop
        self.started_at = time.time() if started_at is None else started_at
        self.replaced_stale = False
        self._viewers: set[_Viewer] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._inode: int | None = None
        self._encoded: tuple[Snapshot, bytes] | None = None

    @property
    def viewers(self) -> int:
        return sum(1 for v in self._viewers if v.subscribed)

    async def start(self) -> None:
        """Bind and listen; ChannelError (one line) when the socket cannot be made."""
        try:
            private_state_dir(self.path.parent)
            self._remove_stale()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                # 0600 from the start: no instant in which another user could connect
                old_umask = os.umask(0o177)
                try:
                    with reachable(self.path) as name:
                        sock.bind(name)
                finally:
                    os.umask(old_umask)
                os.chmod(self.path, SOCKET_MODE)
                self._inode = self.path.lstat().st_ino
                sock.listen(16)
                self._server = await asyncio.start_unix_server(
                    self._serve, sock=sock, limit=MAX_COMMAND_BYTES
                )
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            why = exc.strerror or exc
            raise ChannelError(f"{self.path}: cannot serve the monitor's socket: {why}") from None
        self.monitor.listeners.append(self._on_snapshot)

    def _remove_stale(self) -> None:
        try:
            mode = self.path.lstat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise ChannelError(f"{self.path}: exists and is not a socket; move it away")
        log.info("replacing the stale socket %s (its monitor is gone)", self.path)
        self.path.unlink()
        self.replaced_stale = True

    async def close(self) -> None:
        """Stop listening, hang up on every viewer, remove the socket. Safe to call twice."""
        with contextlib.suppress(ValueError):
            self.monitor.listeners.remove(self._on_snapshot)
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for viewer in list(self._viewers):
            viewer.close()
        # each hung-up connection's handler sees its end and returns; left running, the
        # loop's closing would cancel it (and Python 3.11's streams log that as an error)
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=CLOSE_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await server.wait_closed()
        with contextlib.suppress(OSError):
            # only our own socket: a later monitor may already have replaced it
            if self.path.lstat().st_ino == self._inode:
                self.path.unlink()

    def info(self, request_id: int | None = None) -> Info:
        return Info(
            id=request_id,
            pid=os.getpid(),
            layout=self.layout_file,
            cluster=self.monitor.layout.cluster.name,
            record=self.monitor.record_path,
            started_at=self.started_at,
            viewers=self.viewers,
        )

    # ----------------------------------------------------------------- frames

    def _frame(self, snapshot: Snapshot) -> bytes:
        cached = self._encoded
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        frame = snapshot_line(encode_snapshot(snapshot))
        self._encoded = (snapshot, frame)
        return frame

    def _on_snapshot(self, snapshot: Snapshot) -> None:
        subscribed = [v for v in self._viewers if v.subscribed]
        if not subscribed:
            return  # nobody watching: not even encoded
        frame = self._frame(snapshot)
        for viewer in subscribed:
            viewer.offer(frame)

    # ----------------------------------------------------------------- connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid != os.getuid():
            log.warning("refused a connection from uid %s on %s", uid, self.path)
            with contextlib.suppress(Exception):
                writer.write(line(Refused(detail="this monitor belongs to another user")))
                await writer.drain()
            with contextlib.suppress(Exception):
                writer.close()
            return
        viewer = _Viewer(writer)
        self._viewers.add(viewer)
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
        try:
            viewer.send(line(self.info()))
            while True:
                try:
                    raw = await reader.readline()
                except ValueError:  # longer than MAX_COMMAND_BYTES: not a command, hang up
                    viewer.send(line(Refused(detail=f"a line longer than {MAX_COMMAND_BYTES} bytes")))
                    break
                if not raw.endswith(b"\n"):
                    break  # the viewer hung up (a half line at the end is dropped)
                self._handle(viewer, raw)
                # the next command only once this one's answer is on its way: a viewer that
                # sends and never reads stops being read, rather than grow our buffer
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._viewers.discard(viewer)
            if viewer.in_view:
                self._tell_in_view()
            if handler is not None:
                self._handlers.discard(handler)
            viewer.close()

    def _tell_in_view(self) -> None:
        """The nodes any viewer shows now: their detail is read every tick."""
        self.monitor.set_in_view(frozenset().union(*(v.in_view for v in self._viewers)))

    def _handle(self, viewer: _Viewer, raw: bytes) -> None:
        try:
            command = decode_command(raw)
        except ValueError:
            viewer.send(line(Reply(ok=False, detail="not a command this monitor knows")))
            return
        if isinstance(command, Subscribe):
            viewer.subscribe()
            if self.monitor.latest is not None:  # the newest frame at once, not in a second
                viewer.offer(self._frame(self.monitor.latest))
        elif isinstance(command, AskInfo):
            viewer.send(line(self.info(command.id)))
        elif isinstance(command, MarkPhase):
            try:
                self.monitor.mark_phase(command.phase)
            except ValueError as exc:
                viewer.send(line(Reply(id=command.id, ok=False, detail=str(exc))))
            else:
                viewer.send(line(Reply(id=command.id, ok=True, detail=f"phase {command.phase} marked")))
        elif isinstance(command, ShowInterest):  # a hint: no reply
            viewer.in_view = frozenset(command.nodes)
            self._tell_in_view()
        elif isinstance(command, StopMonitor):
            viewer.send(line(Reply(id=command.id, ok=True, detail="stopping")))
            self.on_stop()
