"""Wait on events, not clocks: poll a predicate until it holds, with a timeout.

Every test that waits for something (a port file, a line of output, a frame, a series in
Prometheus) uses `until` or `until_async`, so that a loaded machine only makes a test
slower, never wrong, and a test never sleeps longer than the thing takes. The timeout is a
ceiling for a hung test, not a measurement: keep it generous.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class _Waiting:
    """One wait's bookkeeping, shared by the sync and async loops."""

    def __init__(
        self,
        timeout_s: float,
        what: str,
        gave_up: Callable[[], bool] | None,
        detail: Callable[[], object] | None,
        ignore: tuple[type[BaseException], ...],
    ) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.what = what
        self.gave_up = gave_up
        self.detail = detail
        self.ignore = ignore
        self.last_error: BaseException | None = None

    def check(self, predicate: Callable[[], T]) -> T | None:
        try:
            return predicate()
        except self.ignore as exc:  # e.g. a server that does not answer yet
            self.last_error = exc
            return None

    def raise_if_over(self) -> None:
        if self.gave_up is not None and self.gave_up():
            self.fail("gave up first")
        if time.monotonic() > self.deadline:
            self.fail(f"timed out after {self.timeout_s:g} s")

    def fail(self, why: str) -> None:
        parts = [f"{why} waiting for {self.what}"]
        if self.last_error is not None:
            parts.append(f"last error: {self.last_error!r}")
        if self.detail is not None:
            parts.append(f"detail: {self.detail()!s}")
        raise AssertionError("; ".join(parts))


def until(
    predicate: Callable[[], T],
    timeout_s: float,
    what: str = "the condition",
    *,
    every_s: float = 0.05,
    gave_up: Callable[[], bool] | None = None,
    detail: Callable[[], object] | None = None,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call `predicate` until it returns something truthy and return that.

    AssertionError naming `what` after `timeout_s`, or as soon as `gave_up()` is true (a
    process that died: no use waiting on it); `detail()` adds context to that message (the
    output so far). Exceptions of the types in `ignore` count as "not yet".
    """
    waiting = _Waiting(timeout_s, what, gave_up, detail, ignore)
    while True:
        value = waiting.check(predicate)
        if value:
            return value
        waiting.raise_if_over()
        time.sleep(every_s)


async def until_async(
    predicate: Callable[[], T],
    timeout_s: float,
    what: str = "the condition",
    *,
    every_s: float = 0.05,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
    gave_up: Callable[[], bool] | None = None,
    detail: Callable[[], object] | None = None,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """`until` for a running event loop: between checks it awaits `pause(every_s)`
    (asyncio.sleep, or a Textual Pilot's `pilot.pause` so the app keeps drawing)."""
    waiting = _Waiting(timeout_s, what, gave_up, detail, ignore)
    while True:
        value = waiting.check(predicate)
        if value:
            return value
        waiting.raise_if_over()
        await pause(every_s)
