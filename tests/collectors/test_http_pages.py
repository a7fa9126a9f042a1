"""The plain-HTTP page client (collectors/sources/http_pages.py) against a real TCP server that
answers with scripted bytes: the framings real exporters use (Content-Length from
uvicorn / aiohttp, chunked from Go's net/http, close-delimited from HTTP/1.0 servers),
kept-alive connections, and every way a hostile or broken node can answer wrong. Each
is read through `ScrapeSource.fetch`, so the message is the one the monitor shows."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from infertop.collectors.sources.http_pages import MAX_HEAD_BYTES, PageClient
from infertop.collectors.sources.scrape import ACCEPT, ScrapeError, ScrapeSource
from tests.support.waiting import until_async

PAGE = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"


def ok(body: bytes = PAGE, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers) or f"Content-Length: {len(body)}\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + head.encode() + b"\r\n" + body


def chunked(body: bytes, piece: int = 7) -> bytes:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + piece]), body[i:i + piece])
                      for i in range(0, len(body), piece))
    return chunks + b"0\r\n\r\n"


@dataclass
class Server:
    """Answers the n-th request (0-based, over all connections) with `answer(n)`: the
    bytes to send (None: never answer) and whether to close the connection after."""

    answer: Callable[[int], tuple[bytes | None, bool]]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    closed_by_client: int = 0
    url: str = ""
    later: bytes = b""  # sent 0.1 s after each answer, unasked


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Callable[[int], tuple[bytes | None, bool]]], Server]]:
    servers: list[asyncio.Server] = []

    async def start(answer: Callable[[int], tuple[bytes | None, bool]]) -> Server:
        state = Server(answer)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            state.connections += 1
            try:
                while True:
                    try:
                        request = await reader.readuntil(b"\r\n\r\n")
                    except asyncio.IncompleteReadError:
                        state.closed_by_client += 1
                        return
                    state.requests.append(request)
                    data, close = state.answer(len(state.requests) - 1)
                    if data is None:
                        await reader.read()  # never answers; notices the client closing
                        state.closed_by_client += 1
                        return
                    writer.write(data)
                    await writer.drain()
                    if close:
                        return
                    if state.later:
                        await asyncio.sleep(0.1)
                        writer.write(state.later)
                        await writer.drain()
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/metrics?collect[]=netdev"
        return state

    yield start
    for server in servers:
        server.close()


def fixed(data: bytes | None, close: bool = False) -> Callable[[int], tuple[bytes | None, bool]]:
    return lambda n: (data, close)


async def fetch(url: str, max_bytes: int = 1 << 20, timeout_s: float = 2.0) -> str:
    source = ScrapeSource({}, interval_s=5.0, max_bytes=max_bytes)
    try:
        text, _ = await source.fetch(url, timeout_s)
        return text
    finally:
        await source.close()


async def test_pages_are_read_over_one_kept_connection(serve: Callable[..., Server]) -> None:
    server = await serve(fixed(ok()))
    source = ScrapeSource({}, interval_s=5.0)
    try:
        for _ in range(3):
            text, _ = await source.fetch(server.url, 2.0)
            assert text == PAGE.decode()
    finally:
        await source.close()
    assert server.connections == 1
    request = server.requests[0].decode()
    # what aiohttp would send for the same URL (yarl writes the target), asking for plain text
    assert request.startswith("GET /metrics?collect%5B%5D=netdev HTTP/1.1\r\n")
    port = server.url.split(":")[2].split("/")[0]
    assert f"\r\nHost: 127.0.0.1:{port}\r\n" in request
    assert f"\r\nAccept: {ACCEPT}\r\n" in request
    assert "\r\nAccept-Encoding: identity\r\n" in request


@pytest.mark.parametrize("answer, connections", [
    # Go's net/http: chunked, with a chunk extension and a trailer now and then
    (ok(chunked(PAGE), "Transfer-Encoding: chunked"), 1),
    (ok(b"%x;name=value\r\n%s\r\n0\r\nExpires: never\r\n\r\n" % (len(PAGE), PAGE),
        "Transfer-Encoding: chunked"), 1),
    # compressed though asked not to be
    (ok(gzip.compress(PAGE, mtime=0), "Content-Encoding: gzip", f"Content-Length: {len(gzip.compress(PAGE, mtime=0))}"), 1),
    # an HTTP/1.0 server: the body ends with the connection; not kept
    (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + PAGE, 2),
    # an interim answer before the page
    (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(), 1),
    # the server says it closes
    (ok(PAGE, "Connection: close", f"Content-Length: {len(PAGE)}"), 2),
])
async def test_framings_real_servers_use(serve: Callable[..., Server], answer: bytes, connections: int) -> None:
    close = answer.startswith(b"HTTP/1.0") or b"Connection: close" in answer
    server = await serve(fixed(answer, close))
    source = ScrapeSource({}, interval_s=5.0)
    try:
        for _ in range(2):
            assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
    finally:
        await source.close()
    assert server.connections == connections


BOMB = gzip.compress(b"0" * (4 << 20), mtime=0)

HOSTILE = {
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1 answer"),
    "header without a colon": (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a malformed header line"),
    "folded header": (b"HTTP/1.1 200 OK\r\nX: a\r\n  b\r\nContent-Length: 1\r\n\r\nx", "a malformed header line"),
    "endless header": (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * (MAX_HEAD_BYTES + 10), "header is larger"),
    "bad length": (ok(PAGE, "Content-Length: 12abc"), "a malformed Content-Length"),
    "two lengths": (ok(PAGE, "Content-Length: 5", "Content-Length: 6"), "a malformed Content-Length"),
    "length over the cap": (ok(b"", "Content-Length: 999999999"), "byte cap"),
    "bad chunk size": (ok(b"zz\r\nhello\r\n0\r\n\r\n", "Transfer-Encoding: chunked"), "a malformed chunk"),
    "chunk longer than said": (ok(b"2\r\nheXX0\r\n\r\n", "Transfer-Encoding: chunked"), "a malformed chunk"),
    "chunks over the cap": (ok(b"ffffff\r\n" + b"a" * 1000, "Transfer-Encoding: chunked"), "byte cap"),
    "other transfer coding": (ok(chunked(PAGE), "Transfer-Encoding: gzip, chunked"), "other than chunked"),
    "gzip bomb": (ok(BOMB, "Content-Encoding: gzip", f"Content-Length: {len(BOMB)}"), "byte cap"),
    "corrupt gzip": (ok(b"\x1f\x8bnot gzip", "Content-Encoding: gzip", "Content-Length: 10"), "corrupt"),
    "brotli": (ok(PAGE, "Content-Encoding: br", f"Content-Length: {len(PAGE)}"), "does not read"),
    "redirect": (b"HTTP/1.1 301 Moved\r\nLocation: http://evil/\r\nContent-Length: 0\r\n\r\n", "HTTP 301 from"),
}


@pytest.mark.parametrize("case", HOSTILE)
async def test_a_wrong_answer_is_an_error_naming_the_url(serve: Callable[..., Server], case: str) -> None:
    answer, message = HOSTILE[case]
    server = await serve(fixed(answer, close=True))
    with pytest.raises(ScrapeError) as caught:
        await fetch(server.url, max_bytes=1 << 20)
    assert message in str(caught.value)
    assert "127.0.0.1" in str(caught.value)


@pytest.mark.parametrize("answer, message", [
    (b"", "the connection closed before an answer"),
    (b"HTTP/1.1 200 OK\r\nContent-Le", "in the middle of the answer's header"),
    (ok(PAGE)[:-10], "the connection closed in the middle of the page"),
    (ok(chunked(PAGE), "Transfer-Encoding: chunked")[:-12], "the connection closed in the middle of the page"),
])
async def test_a_connection_closed_early_is_a_read_error(
    serve: Callable[..., Server], answer: bytes, message: str
) -> None:
    server = await serve(fixed(answer, close=True))
    with pytest.raises(ScrapeError, match=message):
        await fetch(server.url)


async def test_a_close_delimited_page_over_the_cap_stops_at_the_cap(serve: Callable[..., Server]) -> None:
    server = await serve(fixed(b"HTTP/1.0 200 OK\r\n\r\n" + b"a" * 200_000, close=True))
    with pytest.raises(ScrapeError, match="100000-byte cap"):
        await fetch(server.url, max_bytes=100_000)


async def test_a_kept_connection_the_server_closed_is_tried_again(serve: Callable[..., Server]) -> None:
    """A server that closes idle connections (an idle timeout) without saying so: the
    next read finds the kept connection closed and sends the request on a new one."""
    server = await serve(fixed(ok(), close=True))
    source = ScrapeSource({}, interval_s=5.0)
    try:
        for _ in range(3):
            assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
            await asyncio.sleep(0.05)  # the close reaches the client
    finally:
        await source.close()
    assert server.connections == 3


async def test_a_kept_connection_closed_as_the_request_arrives_is_tried_again(
    serve: Callable[..., Server],
) -> None:
    """The race an idle timeout leaves: the server closes the kept connection just as the
    next request goes out on it, without answering. The request was not served: it is
    sent again on a new connection (a GET may be), not reported as the node's failure."""
    server = await serve(lambda n: (b"", True) if n == 1 else (ok(), False))
    source = ScrapeSource({}, interval_s=5.0)
    try:
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
    finally:
        await source.close()
    assert server.connections == 2 and len(server.requests) == 3


async def test_bytes_after_the_page_are_not_read_as_the_next_answer(serve: Callable[..., Server]) -> None:
    """A node that sends a second, forged answer after its page: the next read must not
    take it as that node's next page; the connection is dropped instead."""
    forged = ok(b"vllm:num_requests_running 999\n")

    def answer(n: int) -> tuple[bytes | None, bool]:
        return (ok() + forged if n == 0 else ok()), False

    server = await serve(answer)
    source = ScrapeSource({}, interval_s=5.0)
    try:
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
        await asyncio.sleep(0.05)
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
    finally:
        await source.close()
    assert server.connections == 2


async def test_bytes_sent_unasked_to_a_kept_connection_are_not_read(serve: Callable[..., Server]) -> None:
    """A node that writes into its kept connection between rounds (a forged next answer,
    or a flood): the connection is dropped as the bytes arrive, and the next read gets
    the page on a new one."""
    server = await serve(fixed(ok()))
    server.later = ok(b"vllm:num_requests_running 999\n") + b"x" * 100_000
    source = ScrapeSource({}, interval_s=5.0)
    try:
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
        # dropped as they came, not kept filling up
        await until_async(lambda: server.closed_by_client == 1, 20, "the client to drop the connection")
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
    finally:
        await source.close()
    assert server.connections == 2


async def test_no_answer_times_out_and_the_connection_is_dropped(serve: Callable[..., Server]) -> None:
    server = await serve(lambda n: (None, False) if n == 0 else (ok(), False))
    source = ScrapeSource({}, interval_s=5.0)
    try:
        with pytest.raises(ScrapeError, match=r"no answer from .* within 0\.3 s"):
            await source.fetch(server.url, 0.3)
        assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
    finally:
        await source.close()
    await until_async(lambda: server.closed_by_client >= 1, 20, "the client's close")
    assert server.connections == 2


async def test_refused_is_cannot_connect() -> None:
    with pytest.raises(ScrapeError, match=r"^cannot connect to http://127.0.0.1:9/metrics$"):
        await fetch("http://127.0.0.1:9/metrics")


@pytest.mark.parametrize("url, plain", [
    ("http://decode-01:9400/metrics", True),
    ("http://[::1]:9400/metrics", True),
    ("https://decode-01:9400/metrics", False),  # TLS: aiohttp
    ("http://admin:hunter2@decode-01:9400/metrics", False),  # Basic auth: aiohttp
    ("http://decode-01:9400/metrics?token=abc", True),
])
def test_which_urls_the_lean_client_reads(url: str, plain: bool) -> None:
    assert PageClient(ACCEPT).handles(url) is plain


def test_a_url_cannot_add_lines_to_the_request() -> None:
    """CR/LF or spaces in a layout's URL are percent-encoded into the target (as aiohttp
    would), never written as header lines of their own."""
    from infertop.collectors.sources.http_pages import _plain_target

    target = _plain_target("http://decode-01:9400/metrics\r\nX-Evil: 1?a=b c\r\n\r\nGET /", ACCEPT, "infertop")
    assert target is not None
    head = target.request.decode("ascii")
    assert head.count("\r\n") == 6 and "X-Evil: 1" not in head.split("\r\n")


async def test_kept_connections_stop_at_the_cap(serve: Callable[..., Server]) -> None:
    """Each kept connection is a file descriptor: past the cap, a connection is closed
    after its page instead of kept (the next read opens a new one)."""
    first, second = await serve(fixed(ok())), await serve(fixed(ok()))
    source = ScrapeSource({}, interval_s=5.0)
    source._pages.max_idle = 1
    try:
        for _ in range(3):
            for server in (first, second):
                assert (await source.fetch(server.url, 2.0))[0] == PAGE.decode()
    finally:
        await source.close()
    assert first.connections == 1 and second.connections == 3


def test_the_file_limit_is_raised_for_kept_connections() -> None:
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    PageClient(ACCEPT)
    raised, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert raised >= min(hard, 65_536) or raised == resource.RLIM_INFINITY
    assert PageClient(ACCEPT).max_idle >= 16
