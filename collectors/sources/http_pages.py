"""GET of exposition pages over plain HTTP/1.1: a keep-alive connection per URL, and
nothing else a scrape does not need.

Why not aiohttp for these: at 128 nodes the monitor reads 384 pages a second, and
aiohttp's client spends ~290 µs of CPU on each realistic page (request and response
objects, cookie jar, header multidicts, timers, the stream reader's wake-ups), against
~180 µs for this one, which buffers a response and wakes its reader once it is whole
(Content-Length) or once per chunk (`benchmarks/bench_http_pages.py`). The monitor at 128
realistic nodes, interleaved A/B: 62.2 → 57.0 % of a core (BENCHMARKS.md, "A lean
client for plain-HTTP pages"; that also holds the session's other changes). aiohttp still reads every
URL this does not take (`handles`): https (TLS) and URLs with credentials (Basic auth).

What it sends: `GET <target> HTTP/1.1` with Host, Accept, User-Agent and
`Accept-Encoding: identity` (see `ACCEPT_ENCODING`); the target and Host as aiohttp
would write them (yarl), and only printable ASCII.

What it takes, and how each part is bounded (a node's answer is hostile until read):
- an HTTP/1.0 or 1.1 status line; interim 1xx answers are skipped;
- a header block of at most `MAX_HEAD_BYTES`, in `name: value` lines (no folding);
- a body framed by `Transfer-Encoding: chunked`, a `Content-Length`, or (neither) the
  connection's close; never more than `max_bytes` of it, compressed or not;
- `Content-Encoding` gzip or deflate (a server may compress though asked not to),
  inflated to at most `max_bytes`; any other encoding is an error.
Anything else is `PageError` with a short reason: the caller names the URL. The caller
bounds the time (`collectors.process.loop_stalls.wire_timeout`); a connection whose exchange
was cut short by it, an error, or bytes the answer did not account for is closed, not
kept. A kept connection the server has since closed is retried once on a new one, when
no byte of the answer came on it (the request was then never read).
"""

from __future__ import annotations

import asyncio
import re
import resource
import zlib
from dataclasses import dataclass

import yarl

from infertop.collectors.safe_text import whole_number

# asked for plain text: inflating every page costs the monitor ~0.35 ms a node a second
# at realistic sizes (4–5 % of a core at 128 nodes), and compressing it costs each node's
# engine process more (prometheus_client compresses at level 9); the price is bytes on
# the wire (~430 KB a node a second, not ~22 KB). docs/large-clusters.md: "Network cost".
ACCEPT_ENCODING = "identity"
MAX_HEAD_BYTES = 64 * 1024
MAX_CHUNK_LINE_BYTES = 1024
# kept connections: each is a file descriptor. One a URL (3 a node) outgrows the usual
# soft limit of 1,024 past ~300 nodes, so the limit is raised to the hard one (up to
# WANTED_FILES) once, and at most half of it is kept.
WANTED_FILES = 65_536
MIN_IDLE = 16


def _idle_cap() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = WANTED_FILES if hard == resource.RLIM_INFINITY else min(hard, WANTED_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # not allowed here: keep fewer
    return max(MIN_IDLE, (WANTED_FILES if soft == resource.RLIM_INFINITY else soft) // 2)

_STATUS = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\r\n]*)?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a header name (RFC 9110 token)
_PRINTABLE = re.compile(r"[!-~]+")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})(?:[ \t]*;[^\r\n]*)?")


class PageError(Exception):
    """The answer was not a page this client reads; `str()` is a short reason."""


class ClosedEarly(PageError):
    """The connection closed before any byte of the answer: a kept connection the
    server had closed meanwhile (the request can be sent again on a new one)."""


class ConnectError(PageError):
    """No connection could be made (refused, unreachable, unknown host)."""


class TooBig(PageError):
    """The page is larger than the cap."""


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    request: bytes


class _Connection(asyncio.Protocol):
    """One TCP connection, one exchange at a time. Received bytes pile up in `buffer`;
    the reader waits (`fill`) until it holds what it needs, woken once then."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.busy = False  # an exchange is under way: bytes are its answer
        self._waiter: asyncio.Future[None] | None = None
        self._want = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.busy:
            # bytes nobody asked for, on a kept connection: never taken as the next answer,
            # nor let pile up (a node could stream into it between rounds)
            self.close()
            return
        self.buffer += data
        if self._waiter is not None and len(self.buffer) >= self._want:
            self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def fill(self, size: int) -> bool:
        """Wait until the buffer holds `size` bytes; False if the connection closed first."""
        while len(self.buffer) < size:
            if self.closed:
                return False
            self._want = size
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return True

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def reusable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


class PageClient:
    """Plain-HTTP page reads with kept-alive connections (see the module's doc)."""

    def __init__(self, accept: str, user_agent: str = "infertop") -> None:
        self._accept = accept
        self._user_agent = user_agent
        self._targets: dict[str, _Target | None] = {}
        self._idle: dict[str, list[_Connection]] = {}
        self._idle_count = 0
        self.max_idle = _idle_cap()

    def handles(self, url: str) -> bool:
        """Whether this client reads `url` (plain http, no credentials, a clean target)."""
        return self._target(url) is not None

    def _target(self, url: str) -> _Target | None:
        try:
            return self._targets[url]
        except KeyError:
            target = self._targets[url] = _plain_target(url, self._accept, self._user_agent)
            return target

    async def get(self, url: str, max_bytes: int) -> tuple[int, bytes]:
        """(status, body) of one GET; the body is b"" unless the status is 200 (another
        answer's body is not read: the connection is closed instead)."""
        target = self._target(url)
        if target is None:
            raise ValueError(f"not a URL this client reads: {url!r}")
        kept = self._take_idle(url)
        if kept is not None:
            try:
                return await self._exchange(url, kept, target, max_bytes)
            except ClosedEarly:
                pass  # the server closed it while idle: once more on a new connection
        return await self._exchange(url, await self._connect(target), target, max_bytes)

    async def _connect(self, target: _Target) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(_Connection, target.host, target.port)
        except OSError as exc:
            raise ConnectError(type(exc).__name__) from None
        return conn

    def _take_idle(self, url: str) -> _Connection | None:
        idle = self._idle.get(url)
        while idle:
            conn = idle.pop()
            self._idle_count -= 1
            if conn.reusable and not conn.buffer:
                return conn
            conn.close()
        return None

    def _keep(self, url: str, conn: _Connection) -> None:
        if not conn.reusable or conn.buffer or self._idle_count >= self.max_idle:
            conn.close()
            return
        self._idle.setdefault(url, []).append(conn)
        self._idle_count += 1

    async def _exchange(
        self, url: str, conn: _Connection, target: _Target, max_bytes: int
    ) -> tuple[int, bytes]:
        keep = False
        conn.busy = True
        try:
            assert conn.transport is not None
            conn.transport.write(target.request)
            status, body, keep = await _read_answer(conn, max_bytes)
            return status, body
        finally:
            conn.busy = False
            # anything but a whole answer (an error, a timeout's cancellation) leaves the
            # connection in the middle of an exchange: closed, never reused
            if keep:
                self._keep(url, conn)
            else:
                conn.close()

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        self._idle_count = 0


def _plain_target(url: str, accept: str, user_agent: str) -> _Target | None:
    """The request for `url` when it is plain http without credentials and its target
    and host are printable ASCII as aiohttp (yarl) would write them; else None."""
    try:
        parsed = yarl.URL(url)
        if parsed.scheme != "http" or parsed.user is not None or parsed.password is not None:
            return None
        host, port = parsed.host, parsed.port
        path, authority = parsed.raw_path_qs, parsed.host_port_subcomponent
    except (ValueError, TypeError):
        return None
    if not (host and port and path and authority):
        return None
    if _PRINTABLE.fullmatch(path) is None or _PRINTABLE.fullmatch(authority) is None:
        return None
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: {accept}\r\n"
        f"Accept-Encoding: {ACCEPT_ENCODING}\r\nUser-Agent: {user_agent}\r\n\r\n"
    )
    return _Target(host=host, port=port, request=request.encode("ascii"))


async def _read_head(conn: _Connection) -> tuple[int, int, dict[bytes, list[bytes]], bool]:
    """(status, where the body starts, headers by lower-case name, HTTP/1.1)."""
    buffer = conn.buffer
    scanned = 0
    while True:
        end = buffer.find(b"\r\n\r\n", max(0, scanned - 3))
        if end >= 0:
            break
        if len(buffer) > MAX_HEAD_BYTES:
            raise PageError(f"its header is larger than {MAX_HEAD_BYTES // 1024} KiB")
        scanned = len(buffer)
        if not await conn.fill(scanned + 1):
            if not buffer:
                raise ClosedEarly("the connection closed before an answer")
            raise PageError("the connection closed in the middle of the answer's header")
    if end > MAX_HEAD_BYTES:
        raise PageError(f"its header is larger than {MAX_HEAD_BYTES // 1024} KiB")
    lines = _copy(buffer, 0, end).split(b"\r\n")
    status_line = _STATUS.fullmatch(lines[0])
    if status_line is None:
        raise PageError("not an HTTP/1 answer")
    headers: dict[bytes, list[bytes]] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise PageError("a malformed header line")
        headers.setdefault(name.lower(), []).append(value.strip(b" \t"))
    return int(status_line.group(2)), end + 4, headers, status_line.group(1) == b"1"


async def _read_answer(conn: _Connection, max_bytes: int) -> tuple[int, bytes, bool]:
    """(status, body, whether the connection may be kept) of the answer on `conn`."""
    while True:
        status, start, headers, http11 = await _read_head(conn)
        if status >= 200:
            break
        del conn.buffer[:start]  # an interim answer (100 Continue, 103 Early Hints)
    if status != 200:
        return status, b"", False  # its body is not read: the connection is closed
    tokens = {t.strip().lower() for v in headers.get(b"connection", ()) for t in v.split(b",")}
    keep = (b"close" not in tokens) if http11 else (b"keep-alive" in tokens)
    codings = [t.strip().lower() for v in headers.get(b"transfer-encoding", ()) for t in v.split(b",")]
    if codings:
        if codings != [b"chunked"]:
            raise PageError("a transfer encoding other than chunked")
        # a Content-Length beside it is ignored, and the connection not kept (RFC 9112 6.3)
        keep = keep and b"content-length" not in headers
        body, end = await _chunked_body(conn, start, max_bytes)
    elif b"content-length" in headers:
        lengths = set(headers[b"content-length"])
        length = whole_number(next(iter(lengths)).decode("ascii", "replace")) if len(lengths) == 1 else None
        if length is None:
            raise PageError("a malformed Content-Length")
        if length > max_bytes:
            raise TooBig
        if not await conn.fill(start + length):
            raise PageError("the connection closed in the middle of the page")
        end = start + length
        body = _copy(conn.buffer, start, end)
    else:
        keep = False  # the body ends where the connection does
        while not conn.closed:
            if len(conn.buffer) - start > max_bytes:
                raise TooBig
            await conn.fill(len(conn.buffer) + 1)
        end = len(conn.buffer)
        body = _copy(conn.buffer, start, end)
    if len(body) > max_bytes:
        raise TooBig
    del conn.buffer[:end]
    encodings = [e.strip().lower() for v in headers.get(b"content-encoding", ()) for e in v.split(b",")]
    encodings = [e for e in encodings if e and e != b"identity"]
    if encodings:
        if len(encodings) > 1 or encodings[0] not in (b"gzip", b"x-gzip", b"deflate"):
            raise PageError("compressed in an encoding infertop does not read")
        body = _inflate(body, max_bytes)
    return status, body, keep


async def _chunked_body(conn: _Connection, start: int, max_bytes: int) -> tuple[bytes, int]:
    """The body of a chunked answer from `start`, and where the answer ends."""
    buffer = conn.buffer
    pieces: list[bytes] = []
    size = 0
    pos = start
    while True:
        line_end = buffer.find(b"\r\n", pos)
        while line_end < 0:
            if len(buffer) - pos > MAX_CHUNK_LINE_BYTES:
                raise PageError("a malformed chunk")
            if not await conn.fill(len(buffer) + 1):
                raise PageError("the connection closed in the middle of the page")
            line_end = buffer.find(b"\r\n", pos)
        line = _CHUNK_SIZE.fullmatch(buffer, pos, line_end)
        if line is None:
            raise PageError("a malformed chunk")
        length = int(line.group(1), 16)
        pos = line_end + 2
        if length == 0:
            break
        size += length
        if size > max_bytes:
            raise TooBig
        if not await conn.fill(pos + length + 2):
            raise PageError("the connection closed in the middle of the page")
        if buffer[pos + length:pos + length + 2] != b"\r\n":
            raise PageError("a malformed chunk")
        pieces.append(_copy(buffer, pos, pos + length))
        pos += length + 2
    # trailer lines (usually none), then the blank line that ends the answer
    while True:
        line_end = buffer.find(b"\r\n", pos)
        while line_end < 0:
            if len(buffer) - pos > MAX_HEAD_BYTES:
                raise PageError(f"its trailer is larger than {MAX_HEAD_BYTES // 1024} KiB")
            if not await conn.fill(len(buffer) + 1):
                raise PageError("the connection closed in the middle of the page")
            line_end = buffer.find(b"\r\n", pos)
        if line_end == pos:
            return b"".join(pieces), pos + 2
        if line_end - pos > MAX_HEAD_BYTES:
            raise PageError(f"its trailer is larger than {MAX_HEAD_BYTES // 1024} KiB")
        pos = line_end + 2


def _copy(buffer: bytearray, start: int, end: int) -> bytes:
    """buffer[start:end] as bytes, copied once (a slice of a bytearray is a copy too). The
    view is gone before anything can append to the buffer (a view would forbid that)."""
    with memoryview(buffer) as view:
        return bytes(view[start:end])


def _inflate(body: bytes, max_bytes: int) -> bytes:
    """A gzip or zlib stream inflated to at most `max_bytes` (a bomb stops there)."""
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or a zlib header
    try:
        data = inflater.decompress(body, max_bytes + 1)
    except zlib.error:
        raise PageError("its compressed body is corrupt") from None
    if len(data) > max_bytes:
        raise TooBig
    if not inflater.eof:
        raise PageError("its compressed body is cut short")
    return data
