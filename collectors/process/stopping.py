"""Stopping within 2 s: on SIGINT / SIGTERM, and at the end of --duration / --window.

A command that runs the monitor runs its coroutine with `run_stoppable`: SIGINT and
SIGTERM set its `Stop`, the coroutine returns, its own cleanup is bounded (`Fleet.stop`).
What cannot be bounded from Python is a worker thread blocked in a read — a Prometheus
server that drips one byte a second keeps a `requests` call alive forever, NVML can hang
on a wedged GPU — and both asyncio's shutdown and the interpreter's exit join such
threads. So the loop is closed without waiting for its executor, and `leave` ends the
process with `os._exit` (stdout and stderr flushed first) when a thread is still stuck.
A watchdog is the backstop: STOP_DEADLINE_S after the signal, the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

STOP_DEADLINE_S = 2.0  # from the signal to the process gone, whatever is stuck
LOOP_CLOSE_S = 0.3  # for tasks still running after the command returned, to end
THREAD_GRACE_S = 0.3  # for worker threads to finish on their own before we leave them
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stop:
    """Set by SIGINT / SIGTERM (or by the command itself); says which signal it was."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.signal: int | None = None

    def set(self, signum: int | None = None) -> None:
        if signum is not None and self.signal is None:
            self.signal = signum
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def exit_code(self) -> int | None:
        """128 + the signal's number (the shell's convention), None when no signal came."""
        return None if self.signal is None else 128 + self.signal

    async def wait(self) -> None:
        await self._event.wait()

    async def sleep(self, seconds: float) -> bool:
        """Sleep `seconds`, or less when stopped; True when stopped."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._event.wait()
        return self._event.is_set()


async def watch_parent(pid: int | None, stop: Stop, every_s: float = 0.5) -> None:
    """Set `stop` once process `pid` is gone (None: never): a child started to end with
    its parent (the demo's cluster and monitor) ends even when the parent was killed.

    For our own parent the test is that we were handed to another one: a killed parent
    stays a zombie until its own parent reaps it, and a zombie still answers kill(pid, 0).
    """
    if pid is None:
        return
    ours = os.getppid() == pid
    while not stop.is_set():
        if ours:
            gone = os.getppid() != pid
        else:
            try:
                os.kill(pid, 0)
                gone = False
            except ProcessLookupError:
                gone = True
            except PermissionError:
                gone = False  # it exists (another user's now: pids are reused)
        if gone:
            stop.set()
            return
        await stop.sleep(every_s)


def _flush_and_exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def arm_watchdog(code: int) -> None:
    """Exit with `code` in STOP_DEADLINE_S unless the process has gone by then."""
    timer = threading.Timer(STOP_DEADLINE_S, _flush_and_exit, args=(code,))
    timer.daemon = True
    timer.name = "infertop-stop-watchdog"
    timer.start()


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Like asyncio.run's ending, bounded: cancel what is left, wait a moment, close.

    No `shutdown_default_executor`: it joins every worker thread, forever if one is stuck.
    `loop.close()` shuts the executor down without waiting.
    """
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=LOOP_CLOSE_S))
    with contextlib.suppress(Exception):
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), LOOP_CLOSE_S))
    loop.close()


def run_bounded(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on a fresh loop, closed without joining its executor (see `_close_loop`).

    For the TUI too (`App.run_async`): Textual's own `run` ends with asyncio.run's
    shutdown, which would wait for a stuck worker thread after `q`.
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        _close_loop(loop)


def run_stoppable(main: Coroutine[Any, Any, T], stop: Stop) -> T:
    """Run `main` with `run_bounded`; SIGINT / SIGTERM set `stop` (which `main` watches)
    and arm the watchdog."""

    def on_signal(signum: int) -> None:
        if stop.signal is None:
            log.debug("signal %d: stopping", signum)
            arm_watchdog(128 + signum)
        stop.set(signum)

    async def with_signals() -> T:
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            return await main
        finally:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)

    return run_bounded(with_signals())


def stuck_threads(grace_s: float = THREAD_GRACE_S) -> list[threading.Thread]:
    """Threads that would keep the interpreter from exiting, after `grace_s` to finish."""
    deadline = time.monotonic() + grace_s
    waiting = [
        t for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    for thread in waiting:
        thread.join(max(deadline - time.monotonic(), 0.0))
    return [t for t in waiting if t.is_alive()]


def leave(code: int) -> NoReturn:
    """End the process with `code`: `sys.exit`, or `os._exit` if a worker thread is stuck
    (the interpreter would wait for it at exit, forever if it never returns)."""
    stuck = stuck_threads()
    if stuck:
        log.debug("leaving %d stuck thread(s): %s", len(stuck), ", ".join(t.name for t in stuck))
        _flush_and_exit(code)
    sys.exit(code)
