"""`infertop demo --serve-only` as a test fixture: started, waited for, always stopped."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from layouts import LayoutError, load_layout
from tests.support.paths import infertop_bin


def wait_for_layout(path: Path, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    """Until the demo has written a complete, valid layout (it may still be writing)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"demo exited early: {proc.stdout.read() if proc.stdout else ''}")
        if path.exists():
            with contextlib.suppress(LayoutError):
                load_layout(path)
                return
        time.sleep(0.1)
    raise AssertionError("the demo wrote no layout in time")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def serving_demo(layout: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """The demo's endpoints, serving until the block ends; `layout` is where it writes."""
    proc = subprocess.Popen(
        [infertop_bin(), "demo", "--serve-only", *args, "--layout-out", str(layout)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for_layout(layout, proc)
        yield proc
    finally:
        stop(proc)
