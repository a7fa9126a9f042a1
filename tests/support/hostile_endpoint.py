"""A hostile HTTP endpoint as a real process: ``python -m tests.support.hostile_endpoint MODE PORT_FILE``.

Modes: ``silent`` accepts connections and never answers; ``drip`` answers 200 with
headers and then one byte of body every 0.2 s, forever (a per-read timeout never fires).
The port is written to PORT_FILE once it listens; each accepted connection adds a byte to
PORT_FILE's `.accepted` companion (`accepted(port_file)` counts them). Stop it with SIGTERM; tests use
`serving(mode, port_file)`.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import REPO
from tests.support.port_file_process import stop, wait_for_port


def silent(conn: socket.socket) -> None:
    while conn.recv(65536):
        pass


def drip(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    while True:
        conn.sendall(b" ")
        time.sleep(0.2)


MODES = {"silent": silent, "drip": drip}


def serve(mode: str, port_file: Path) -> None:
    handle = MODES[mode]
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(listener.getsockname()[1]))
    tmp.rename(port_file)

    def run(conn: socket.socket) -> None:
        try:
            handle(conn)
        except OSError:
            pass
        finally:
            conn.close()

    while True:
        conn, _ = listener.accept()
        with accepted_file(port_file).open("a") as count:  # an event tests can wait on
            count.write(".")
        threading.Thread(target=run, args=(conn,), daemon=True).start()


def accepted_file(port_file: Path) -> Path:
    return port_file.with_suffix(".accepted")


def accepted(port_file: Path) -> int:
    """How many connections the endpoint has accepted so far."""
    path = accepted_file(port_file)
    return len(path.read_text()) if path.exists() else 0


@contextlib.contextmanager
def serving(mode: str, port_file: Path) -> Iterator[int]:
    """The endpoint in its own process until the block ends; yields its port."""
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.hostile_endpoint", mode, str(port_file)], cwd=REPO)
    try:
        yield wait_for_port(proc, port_file, f"hostile http ({mode})")
    finally:
        stop(proc)


if __name__ == "__main__":
    serve(sys.argv[1], Path(sys.argv[2]))
