"""`infertop demo --serve-only` as a test fixture: started, waited for, always stopped."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from infertop.layouts import LayoutError, load_layout
from tests.support.paths import infertop_bin
from tests.support.waiting import until


def wait_for_layout(path: Path, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    """Until the demo has written a complete, valid layout (it may still be writing)."""

    def complete() -> bool:
        if not path.exists():
            return False
        load_layout(path)  # LayoutError while the demo is still writing it
        return True

    until(
        complete, timeout_s, "the demo to write its layout", every_s=0.1, ignore=(LayoutError,),
        gave_up=lambda: proc.poll() is not None,
        detail=lambda: proc.stdout.read() if proc.poll() is not None and proc.stdout else "",
    )


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
