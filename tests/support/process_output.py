"""A process's output (a pipe or a pseudo-terminal) collected by a thread, so that the
process never blocks on a full pipe, and waited on for a piece of text."""

from __future__ import annotations

import os
import subprocess
import threading

from tests.support.waiting import until


class OutputReader:
    def __init__(self, proc: subprocess.Popen[bytes], fd: int) -> None:
        self.proc = proc
        self.output = b""
        self._fd = fd
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def wait_for(self, text: bytes, timeout_s: float = 60.0) -> None:
        """Until `text` has been written; AssertionError (with the last output) if the
        process ends first or the time runs out."""
        until(
            lambda: text in self.output, timeout_s, f"{text!r} in the output",
            gave_up=lambda: text not in self.output and self.proc.poll() is not None,
            detail=lambda: repr(self.output[-2000:]),
        )

    def join(self, timeout_s: float) -> None:
        """Until the reader has seen the end of the output (the process closed it)."""
        self._thread.join(timeout_s)
