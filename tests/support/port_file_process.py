"""A test server in a process of its own that writes its port to a file once it listens:
wait for the port, and stop the process however it is."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.waiting import until


def wait_for_port(proc: subprocess.Popen[bytes], port_file: Path, what: str, timeout_s: float = 30.0) -> int:
    """The port `proc` wrote to `port_file`; AssertionError if it died or never did."""
    until(port_file.exists, timeout_s, f"{what} to start", gave_up=lambda: proc.poll() is not None)
    return int(port_file.read_text())


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
