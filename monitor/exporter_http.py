"""The exporter's HTTP side: `/metrics` served from the monitor's latest Snapshot.

prometheus_client's WSGI app on a threaded stdlib server, with a real listen backlog and
a deadline for each request, so idle or slowloris clients hold only their own thread and
never delay a scrape.
"""

from __future__ import annotations

import io
import logging
import socket
import threading
import time
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from infertop.monitor.exporter import SnapshotCollector
from infertop.monitor.monitor import Monitor

LISTEN_BACKLOG = 1024  # connections the kernel queues before we accept them
READ_DEADLINE_S = 5.0  # for a client's whole request to arrive (Prometheus sends it at once)
SEND_TIMEOUT_S = 10.0  # for each write of the answer to a client that does not read
log = logging.getLogger(__name__)


class _DeadlineReader(io.RawIOBase):
    """A connection's incoming bytes, all due by one deadline.

    A socket timeout bounds each read, so a client sending a header byte every few
    seconds (a slowloris) would hold its thread forever; this bounds the whole request.
    """

    def __init__(self, sock: socket.socket, deadline: float, send_timeout_s: float):
        self.sock = sock
        self.deadline = deadline
        self.send_timeout_s = send_timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self.sock.settimeout(left)
        try:
            return self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.send_timeout_s)  # what the answer is written under


class _Handler(WSGIRequestHandler):
    """One request per connection, read by a deadline; no access log on stderr."""

    read_deadline_s = READ_DEADLINE_S
    timeout = SEND_TIMEOUT_S  # per send of the answer: a client that never reads is dropped

    def setup(self) -> None:
        super().setup()
        deadline = time.monotonic() + self.read_deadline_s
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline, SEND_TIMEOUT_S))

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per connection (a slow client holds only its own), a real listen backlog."""

    daemon_threads = True
    # socketserver's default is 5: a burst of connections overflowed it and the kernel
    # dropped SYNs, so a scrape in the burst waited out TCP's 1 s, 3 s, 7 s… retries
    request_queue_size = LISTEN_BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that timed out or went away: no traceback on the exporter's stderr
        log.debug("exporter: connection from %s failed", client_address, exc_info=True)


def start_server(
    monitor: Monitor, host: str, port: int, read_deadline_s: float = READ_DEADLINE_S
) -> WSGIServer:
    """Serve `monitor.latest` on http://host:port/metrics from a daemon thread. OSError
    when the address cannot be bound."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: monitor.latest))
    handler = type("Handler", (_Handler,), {"read_deadline_s": read_deadline_s})
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("Server", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(host, port, make_wsgi_app(registry), server_class, handler)
    threading.Thread(target=server.serve_forever, name="exporter-http", daemon=True).start()
    return server
