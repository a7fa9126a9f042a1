"""The SSH source: one asyncssh connection per node, one long-lived probe session on it.

The probe (collectors/probe/main.py, bundled by collectors/probe/bundle.py) is sent on the
session's stdin behind a fixed bootstrap command and streams one JSON line per interval;
each line becomes a `NodeSample`. Nothing from the layout reaches the remote shell: the
command is a constant (plus the interpreter name, shell-quoted), and the per-node config
travels as JSON on stdin.

Per node, a task connects (bounded by a shared semaphore, staggered at start), streams,
and on any failure emits an error sample saying what happened, then reconnects after a
capped exponential backoff with jitter. One node failing never delays another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import shlex
import socket
import stat
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from infertop.collectors.probe.bundle import BOOTSTRAP, bootstrap_payload
from infertop.collectors.probe.engine import ENGINE_MAX_BYTES
from infertop.collectors.probe.log_follower import LineSplitter
from infertop.collectors.probe.schema import BadReading, parse_reading_line, reading_sample
from infertop.collectors.process.loop_stalls import wire_timeout
from infertop.collectors.safe_text import inert_text, redact_text, url_secrets
from infertop.collectors.sample import EngineSample, NodeSample, PageOutcome
from infertop.collectors.sources.log_source import log_watch_config
from infertop.collectors.sources.routing import route_layout
from infertop.collectors.sources.source import Emit, Source
from infertop.layouts.model import Layout, NodeConfig, SshOptions, split_ssh_target

log = logging.getLogger(__name__)

ENGINE_TIMEOUT_MAX_S = 2.0
STARTUP_S = 30.0  # how long a fresh probe may take to its first reading
# A reading carries the engine's metrics text (ENGINE_MAX_BYTES at most; JSON escapes
# quotes and newlines, well under 2x for an exposition) besides GPUs, NICs and notes: a
# longer line is not one (an engine sending binary would escape to 6 bytes per byte)
PROBE_MAX_LINE_BYTES = 2 * ENGINE_MAX_BYTES + 1024 * 1024
# Read up to a whole channel window (asyncssh's default, 2 MiB) at a time: asyncssh grants
# the peer a fresh window whenever a read lets buffered data through, so reading 64 KiB
# at a time from a peer that sends faster let it buffer without bound (hundreds of MB).
PROBE_READ_BYTES = 2 * 1024 * 1024
CLOSE_WAIT_S = 0.5  # for every connection together to close on quitting


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int | None = None
    user: str | None = None


def parse_target(target: str) -> SshTarget:
    """`alias`, `user@host`, `host:port`, `user@[v6addr]:port` → parts (None = from config).

    Checked by the layout's grammar again here (ValueError): asyncssh puts the host into
    the user's ssh config (`%h` in a ProxyCommand), so a target is never free text.
    """
    user, host, port = split_ssh_target(target)
    return SshTarget(host=host, port=port, user=user)


def checked_ssh_config(path: str) -> str:
    """`path` if it is a regular file owned by this user (or root) that no one else may
    write; else ValueError. A config can run commands (ProxyCommand, `Match exec`), and
    this one is named by the layout: held to what OpenSSH asks of ~/.ssh/config."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ValueError(f"ssh config {path}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"ssh config {path} is not a regular file")
    if st.st_uid not in (os.getuid(), 0):
        raise ValueError(f"ssh config {path} is owned by another user (uid {st.st_uid})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if st.st_mode & stat.S_IWOTH else "its group"
        raise ValueError(f"ssh config {path} is writable by {who}: not read (chmod go-w)")
    return path


@dataclass(frozen=True)
class SshNode:
    """One node read over SSH; `engine_url` is fetched by the probe on the node's side."""

    name: str
    target: str
    engine_url: str | None = None
    engine_profile: str = "vllm"
    engine_log_json: str | None = None  # the probe's LogWatch config (log_source.log_watch_config)
    npu_smi: bool = True  # read Ascend NPUs with npu-smi when the node has no NVIDIA GPU
    # the layout's expected ports: the probe reads them even when named like virtual
    # plumbing (collectors.virtual_nics), which it otherwise leaves out
    keep_nics: tuple[str, ...] = ()


def probe_command(python: str) -> str:
    """The fixed command line; every part shell-quoted."""
    return shlex.join([python, "-c", BOOTSTRAP])


def describe_error(exc: BaseException, node: SshNode, timeout_s: float) -> str:
    """What happened, in words an operator acts on."""
    detail = inert_text(str(exc) or type(exc).__name__)
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return f"host key not trusted for {node.target}: {detail} (check known_hosts)"
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"auth failed for {node.target}: {detail}"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused by {node.target}"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"timed out connecting to {node.target} after {timeout_s:g} s"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {node.target}: {detail}"
    if isinstance(exc, asyncssh.ConnectionLost):
        return f"connection to {node.target} lost: {detail}"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected by {node.target}: {detail}"
    if isinstance(exc, OSError):
        return f"network error reaching {node.target}: {detail}"
    return f"ssh {node.target}: {type(exc).__name__}: {detail}"


class ProbeEnded(Exception):
    """The probe stopped streaming; the message says why (with its last stderr line)."""


# engine text and profile → the engine figures and the notes the page deserves
EngineConverter = Callable[[str, str], tuple[EngineSample, list[str]]]


def _load_engine_converter(custom_profiles: dict[str, Any] | None) -> EngineConverter | None:
    """The scrape source's exposition parser, when it is installed (imported lazily)."""
    try:
        from infertop.collectors.pages import profiles  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        return None
    convert = getattr(profiles, "engine_reading_from_text", None)
    if convert is None:
        return None

    def run(text: str, profile: str) -> tuple[EngineSample, list[str]]:
        result: tuple[EngineSample, list[str]] = convert(text, profile, custom_profiles, source="endpoint")
        return result

    return run


class ProbeLines:
    """The probe's stdout as lines, bounded in length and in rate; only the newest waits.

    `pump` (run as a task) reads whatever the channel holds, cuts it into lines of at most
    `max_line_bytes` (a longer one is dropped and counted, and nothing of it is kept) and
    keeps the newest complete line only: a probe flooding lines costs a split per line,
    not a parse. It reads at most `max_bytes_per_s` (a token bucket holding one second's
    worth); past that it stops reading and SSH flow control makes the node wait.
    `next_line` hands out the newest line; `counts` says what was dropped, for a note.
    `read` is any `read(n) -> bytes` coroutine: an SSH channel's, or a pipe's in tests.
    """

    def __init__(
        self,
        read: Callable[[int], Awaitable[bytes]],
        max_line_bytes: int = PROBE_MAX_LINE_BYTES,
        max_bytes_per_s: float = float(PROBE_MAX_LINE_BYTES),
    ):
        self._read = read
        self._lines = LineSplitter(max_line_bytes)
        self.max_bytes_per_s = max_bytes_per_s
        self._allowance = max_bytes_per_s
        self._refilled_at: float | None = None
        self._newest: bytes | None = None
        self._arrived = asyncio.Event()
        self._failure: BaseException | None = None
        self.ended = False
        self.superseded = 0  # complete lines replaced by a newer one before they were used
        self.bad = 0  # lines handed out that were not a reading (counted by the caller)
        self.last_bad: str | None = None

    @property
    def overlong(self) -> int:
        return self._lines.overlong_lines

    async def _pace(self) -> None:
        """Wait until the byte budget is positive again (refilled at max_bytes_per_s)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._refilled_at is not None:
            self._allowance = min(
                self.max_bytes_per_s, self._allowance + (now - self._refilled_at) * self.max_bytes_per_s
            )
        self._refilled_at = now
        if self._allowance < 0:
            await asyncio.sleep(-self._allowance / self.max_bytes_per_s)

    async def pump(self) -> None:
        """Read to the end of the stream (or its failure, raised from `next_line`)."""
        try:
            while True:
                await self._pace()
                data = await self._read(PROBE_READ_BYTES)
                if not data:
                    break
                self._allowance -= len(data)
                lines = self._lines.feed(data)
                if lines:
                    self.superseded += len(lines) - 1 + (self._newest is not None)
                    self._newest = lines[-1]
                    self._arrived.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the channel failed: the caller says how
            self._failure = exc
        finally:
            self.ended = True
            self._arrived.set()

    async def next_line(self) -> bytes | None:
        """The newest complete line, waiting for one; None once the stream has ended."""
        while self._newest is None and not self.ended:
            self._arrived.clear()
            await self._arrived.wait()
        line, self._newest = self._newest, None
        if line is None and self._failure is not None:
            raise self._failure
        return line

    def dropped(self) -> list[str]:
        """One note per kind of line dropped so far (none when nothing was)."""
        notes = []
        if self.overlong:
            notes.append(
                f"probe stream: {self.overlong} over-long line(s) dropped "
                f"(over {self._lines.max_line_bytes // 1_000_000} MB)"
            )
        if self.bad:
            notes.append(f"probe stream: {self.bad} unreadable line(s) dropped (last: {self.last_bad})")
        if self.superseded:
            notes.append(
                f"probe stream: {self.superseded} line(s) came faster than the interval; "
                "only the newest was read"
            )
        return notes


class SshSource(Source):
    kind = "ssh"

    def __init__(
        self,
        nodes: Sequence[SshNode],
        interval_s: float,
        options: SshOptions | None = None,
        *,
        custom_profiles: dict[str, Any] | None = None,
        backoff_base_s: float = 0.5,
        stagger_s: float = 0.02,
        stall_s: float | None = None,
    ):
        super().__init__([n.name for n in nodes])
        self.ssh_nodes = list(nodes)
        self.interval_s = interval_s
        self.options = options or SshOptions()
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = self.options.backoff_cap_s
        self.stagger_s = stagger_s
        # a session that is up but silent (hung node, stopped probe) is dropped after this
        self.stall_s = stall_s if stall_s is not None else max(5 * interval_s, 5.0)
        self.command = probe_command(self.options.python)
        if self.options.insecure_no_host_key_check:
            log.warning("ssh: host keys are NOT verified (layout ssh.insecure_no_host_key_check)")
        self._custom_profiles = custom_profiles
        self._engine: EngineConverter | None = None
        self._engine_loaded = False
        self._semaphore: asyncio.Semaphore | None = None
        self._conns: dict[str, asyncssh.SSHClientConnection] = {}
        self.connects: dict[str, int] = {n.name: 0 for n in nodes}  # for tests and benchmarks

    # ------------------------------------------------------------------ connection

    def _connect_kwargs(self, target: SshTarget) -> dict[str, Any]:
        opts = self.options
        kwargs: dict[str, Any] = {
            "connect_timeout": opts.connect_timeout_s,
            "login_timeout": opts.connect_timeout_s,
            "keepalive_interval": opts.keepalive_s,
            "keepalive_count_max": 3,
        }
        if target.port is not None:
            kwargs["port"] = target.port
        if target.user is not None:
            kwargs["username"] = target.user
        if opts.config is not None:
            kwargs["config"] = [checked_ssh_config(os.path.expanduser(opts.config))]
        if opts.identity_files:
            kwargs["client_keys"] = [os.path.expanduser(p) for p in opts.identity_files]
        if opts.insecure_no_host_key_check:
            kwargs["known_hosts"] = None  # explicit opt-out; shown on screen as insecure_ssh
        elif opts.known_hosts is not None:
            kwargs["known_hosts"] = os.path.expanduser(opts.known_hosts)
        # else: asyncssh's default, the config's UserKnownHostsFile or ~/.ssh/known_hosts
        return kwargs

    async def _connect(self, node: SshNode) -> asyncssh.SSHClientConnection:
        target = parse_target(node.target)
        assert self._semaphore is not None
        async with self._semaphore:
            self.connects[node.name] += 1
            # connect_timeout covers TCP + handshake + auth; the outer bound is a backstop
            # (asyncio.timeout: wait_for on 3.11 can swallow a cancel, see _read_readings)
            async with asyncio.timeout(self.options.connect_timeout_s + 5.0):
                return await asyncssh.connect(target.host, **self._connect_kwargs(target))

    def _config_json(self, node: SshNode) -> str:
        config: dict[str, Any] = {"interval_s": self.interval_s}
        if node.engine_url:
            config["engine"] = {
                "url": node.engine_url,
                "timeout_s": min(self.interval_s * 0.8, ENGINE_TIMEOUT_MAX_S),
            }
        if node.engine_log_json:
            config["engine_log"] = json.loads(node.engine_log_json)
        if not node.npu_smi:
            config["npu_smi"] = False
        if node.keep_nics:
            config["keep_nics"] = list(node.keep_nics)
        return json.dumps(config)

    # ------------------------------------------------------------------ streaming

    def _sample(self, node: SshNode, line: bytes, lines: ProbeLines) -> NodeSample | None:
        """One line → a sample; a line that is not a reading is counted in `lines` and
        dropped (None): one bad line from a node never ends its session."""
        now = time.time()
        try:
            reading = parse_reading_line(line)
            notes: list[str] = []
            engine: EngineSample | None = None
            text = reading.pop("engine_text", None)
            fetch_error = reading.pop("engine_error", None)
            page_error: str | None = None
            if isinstance(fetch_error, str):
                # the node quotes the URL it was given: never its password or token
                page_error = inert_text(redact_text(fetch_error, url_secrets(node.engine_url)))
                notes.append(page_error)
            if isinstance(text, str):
                engine, engine_notes = self._convert_engine(text, node.engine_profile)
                notes += engine_notes
                if engine is None and engine_notes:
                    page_error = engine_notes[0]
            sample = reading_sample(node.name, self.kind, reading, now)
        except BadReading as exc:
            lines.bad += 1
            lines.last_bad = inert_text(str(exc), 80)
            return None
        notes.extend(lines.dropped())
        pages = []
        if node.engine_url and (isinstance(text, str) or page_error is not None):
            # the engine page the probe fetched on the node's side: its failure is the
            # reason the engine figures are unknown (coverage)
            pages.append(
                PageOutcome(kind="engine", url=node.engine_url, ok=page_error is None, error=page_error,
                            parts=("engine",))
            )
        if sample.error is None and (engine is not None or notes or pages):
            sample = sample.model_copy(
                update={"engine": engine or sample.engine, "notes": [*sample.notes, *notes], "pages": pages}
            )
        return sample

    def _convert_engine(self, text: str, profile: str) -> tuple[EngineSample | None, list[str]]:
        if not self._engine_loaded:
            self._engine = _load_engine_converter(self._custom_profiles)
            self._engine_loaded = True
        if self._engine is None:
            return None, ["engine text received but no exposition parser is installed"]
        try:
            engine, notes = self._engine(text, profile)
        except Exception as exc:  # ExpositionError or a bad profile: a note, not a crash
            return None, [f"engine metrics: {inert_text(str(exc))}"]
        return engine, [inert_text(n) for n in notes]

    async def _stream(self, node: SshNode, conn: asyncssh.SSHClientConnection, emit: Emit) -> None:
        """Run the probe and emit its readings until it stops (raises `ProbeEnded`)."""
        process = await conn.create_process(self.command, encoding=None)
        stderr_tail: deque[str] = deque(maxlen=5)

        async def drain_stderr() -> None:
            # bounded like stdout: a probe's stderr is lines too, and only the last few matter
            errors = ProbeLines(process.stderr.read, max_line_bytes=4096, max_bytes_per_s=64 * 1024)
            pump = asyncio.create_task(errors.pump())
            try:
                while (raw := await errors.next_line()) is not None:
                    text = inert_text(raw.decode("utf-8", "replace")).strip()
                    if text:
                        stderr_tail.append(text)
            except (OSError, asyncssh.Error):
                pass  # the channel went: stdout's reading says how
            finally:
                pump.cancel()

        stdout = ProbeLines(process.stdout.read, max_bytes_per_s=PROBE_MAX_LINE_BYTES / self.interval_s)
        pump = asyncio.create_task(stdout.pump())
        stderr_task = asyncio.create_task(drain_stderr())
        try:
            process.stdin.write(bootstrap_payload(self._config_json(node)))
            await self._read_readings(node, stdout, emit)
            # EOF on stdout: the probe exited; let stderr and the exit status arrive
            with contextlib.suppress(TimeoutError, asyncssh.Error):
                async with asyncio.timeout(2.0):
                    await process.wait_closed()
            with contextlib.suppress(TimeoutError, asyncssh.Error):
                async with asyncio.timeout(1.0):
                    await stderr_task
            status = process.exit_status
            signal = process.exit_signal
            if status is None and not signal:
                raise ProbeEnded(f"connection to {node.target} closed")
            how = f"signal {signal[0]}" if signal else f"status {status}"
            last = stderr_tail[-1] if stderr_tail else "no stderr"
            if status == 127 or "not found" in last:
                raise ProbeEnded(f"probe could not start ({how}): {last}")
            raise ProbeEnded(f"probe crashed ({how}): {last}")
        finally:
            pump.cancel()
            stderr_task.cancel()
            process.close()

    async def _read_readings(self, node: SshNode, lines: ProbeLines, emit: Emit) -> None:
        """Emit the newest line's reading at most every half interval, until EOF.

        The probe sends one line per interval; anything faster is coalesced by `lines`
        (only the newest counts). A session with no valid reading for the stall time
        (first: the start-up time) is over, whatever else the node sends.
        """
        # the first reading waits for interpreter start and nvmlInit (seconds on a big
        # node, longer on a busy one); after that a silent probe is a stalled one
        wait_s = max(self.stall_s, STARTUP_S)
        loop = asyncio.get_running_loop()
        last_reading_at = loop.time()
        while True:
            # a timeout context, not wait_for: on Python 3.11 wait_for swallows a cancel
            # that arrives as the line does, and a flooding probe always has a line ready.
            # On the wire (collectors.process.loop_stalls): a monitor that stood still has not
            # seen the lines the probe sent meanwhile, and must not end the session for it
            try:
                async with wire_timeout(max(last_reading_at + wait_s - loop.time(), 0.0)):
                    line = await lines.next_line()
            except TimeoutError:
                dropped = "; ".join(lines.dropped())
                raise ProbeEnded(
                    f"no reading from the probe for {wait_s:g} s" + (f" ({dropped})" if dropped else "")
                ) from None
            if line is None:
                return
            sample = self._sample(node, line, lines)
            if sample is not None:
                emit(sample)
                wait_s = self.stall_s
                last_reading_at = loop.time()
            await asyncio.sleep(self.interval_s / 2)

    async def _node_loop(self, node: SshNode, index: int, emit: Emit) -> None:
        # staggered start: a burst of handshakes trips sshd MaxStartups on a shared jump host
        await asyncio.sleep(index * self.stagger_s)
        failures = 0
        while True:
            conn: asyncssh.SSHClientConnection | None = None
            try:
                conn = await self._connect(node)
                self._conns[node.name] = conn
                counting = _CountingEmit(emit)
                try:
                    await self._stream(node, conn, counting)
                finally:
                    if counting.count:
                        failures = 0  # it streamed: the next failure starts the backoff afresh
                message = "probe stopped"
            except asyncio.CancelledError:
                raise
            except ProbeEnded as exc:
                message = str(exc)
            except ValueError as exc:  # bad target / config / key file
                message = f"ssh setup for {node.target}: {inert_text(str(exc))}"
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                message = describe_error(exc, node, self.options.connect_timeout_s)
            except Exception as exc:  # never let one node's surprise end its task
                log.debug("ssh %s failed", node.name, exc_info=True)
                message = f"ssh {node.target}: {type(exc).__name__}: {inert_text(str(exc))}"
            finally:
                if conn is not None:
                    self._conns.pop(node.name, None)
                    conn.close()
            emit(self.error_sample(node.name, message))
            failures += 1
            await asyncio.sleep(self.backoff_s(failures))

    def backoff_s(self, failures: int) -> float:
        """Capped exponential with jitter (half fixed, half random: never a thundering herd)."""
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2 ** min(failures - 1, 30))
        return ceiling * (0.5 + random.random() / 2)

    async def run(self, emit: Emit) -> None:
        self._semaphore = asyncio.Semaphore(self.options.max_concurrent_handshakes)
        tasks = [
            asyncio.create_task(self._node_loop(node, i, emit), name=f"ssh:{node.name}")
            for i, node in enumerate(self.ssh_nodes)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        if conns:
            # all at once and bounded: quitting must not wait 2 s per unresponsive node
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_WAIT_S):
                    await asyncio.gather(*(conn.wait_closed() for conn in conns), return_exceptions=True)


class _CountingEmit:
    """Wraps emit to know whether a session produced anything (resets the backoff)."""

    def __init__(self, emit: Emit):
        self.emit = emit
        self.count = 0

    def __call__(self, sample: NodeSample) -> None:
        if sample.error is None:
            self.count += 1
        self.emit(sample)


def _engine_log_json(node: NodeConfig, layout: Layout) -> str | None:
    config = log_watch_config(node.engine, layout) if node.engine is not None else None
    return json.dumps(config) if config is not None else None


def ssh_source_for(layout: Layout) -> SshSource | None:
    """One `SshSource` for every node whose parts the probe reads (sharing one handshake
    bound); which parts those are is collectors/sources/routing.py's answer."""
    nodes: list[SshNode] = []
    for route in route_layout(layout).read_by("ssh"):
        node, engine = route.node, route.node.engine
        assert node.ssh is not None  # the probe reads only nodes with an ssh target
        nodes.append(
            SshNode(
                name=route.name,
                target=node.ssh,
                engine_url=engine.url if engine is not None and route.reads("engine_page", "ssh") else None,
                engine_profile=engine.profile if engine is not None else "vllm",
                engine_log_json=_engine_log_json(node, layout) if route.reads("engine_log", "ssh") else None,
                # NPUs an npu-exporter page reports: no npu-smi on the node
                npu_smi=route.reads("accelerators", "ssh"),
                keep_nics=tuple(n.name for n in node.nics),
            )
        )
    if not nodes:
        return None
    return SshSource(nodes, layout.cluster.interval_s, layout.ssh, custom_profiles=layout.profiles)
