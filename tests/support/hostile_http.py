"""A real HTTP server on loopback that says whatever a test wants, and remembers what it heard.

stdlib `http.server` in a thread of its own, so that a subprocess (`python -m infertop
snapshot`) or a blocking client (requests) can talk to it while the test waits. Each
route answers with any status, reason phrase (control characters included), headers and
body; every request's path and headers are recorded.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 drops SYNs when a scrape opens many connections
    # at once; the client then waits a whole second to retry
    request_queue_size = 128


@dataclass
class Reply:
    status: int = 200
    body: str | bytes = b""
    reason: str | None = None  # latin-1 text; may hold ESC, BEL, C1 controls
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/plain; version=0.0.4"


@dataclass
class Heard:
    path: str
    headers: dict[str, str]


class HttpServer:
    """`routes`: path without query → Reply (or a callable taking the full path)."""

    def __init__(self, routes: dict[str, Reply]):
        self.routes = routes
        self.heard: list[Heard] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                owner.heard.append(Heard(self.path, dict(self.headers.items())))
                reply = owner.routes.get(self.path.split("?", 1)[0], Reply(status=404, body=b"no"))
                body = reply.body.encode("utf-8") if isinstance(reply.body, str) else reply.body
                self.send_response_only(reply.status, reply.reason)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def dead_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
