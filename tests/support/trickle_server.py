"""An HTTP server that sends a page the way real networks deliver big ones: in small
pieces with pauses between them, so the client sees many short reads.

Run as a script (stdlib only, so it also runs inside a network namespace with a bare
`python3 -I`): `trickle_server.py PAGE [--piece 4096] [--pause 0.002] [--chunked]`. It
prints its port on the first line of stdout, then serves PAGE on every GET until killed.
`--chunked` sends `Transfer-Encoding: chunked` (one HTTP chunk per piece) instead of a
Content-Length.
"""

from __future__ import annotations

import argparse
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("page")
    parser.add_argument("--piece", type=int, default=4096)
    parser.add_argument("--pause", type=float, default=0.002)
    parser.add_argument("--chunked", action="store_true")
    args = parser.parse_args()
    with open(args.page, "rb") as f:
        body = f.read()

    class Trickle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            # every piece leaves in its own segment: the client cannot get it in one read
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            if args.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            for start in range(0, len(body), args.piece):
                piece = body[start:start + args.piece]
                if args.chunked:
                    piece = b"%x\r\n%s\r\n" % (len(piece), piece)
                self.wfile.write(piece)
                self.wfile.flush()
                time.sleep(args.pause)
            if args.chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
