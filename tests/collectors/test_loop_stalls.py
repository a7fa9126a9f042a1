"""Timeouts on the wire: the loop's own stalls are measured and never count as a peer's
silence, and a peer that truly does not answer still times out.

Real sockets: a threaded TCP server on loopback that answers after a delay, or never.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from infertop.collectors.process.loop_stalls import (
    LoopStallMeter,
    acquire_meter,
    covered_s,
    release_meter,
    runqueue_wait_s,
    wire_timeout,
)


@pytest.fixture
async def meter() -> AsyncIterator[LoopStallMeter]:
    m = acquire_meter()
    try:
        yield m
    finally:
        await release_meter(m)


@contextlib.contextmanager
def serving(answer_after_s: float | None) -> Iterator[int]:
    """A peer in threads of its own (it answers while this loop is blocked, as another
    machine would): one line back `answer_after_s` after a line in (None: never)."""
    stop = threading.Event()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.rfile.readline()
            if answer_after_s is None:
                stop.wait(30)
                return
            time.sleep(answer_after_s)
            self.wfile.write(b"pong\n")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


async def ask(port: int, timeout_s: float, block_s: float = 0.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with wire_timeout(timeout_s):
            writer.write(b"ping\n")
            await writer.drain()
            if block_s:
                time.sleep(block_s)  # the whole loop stands still while the answer comes
            return await reader.readline()
    finally:
        writer.close()


async def test_an_answer_that_came_while_the_loop_stood_still_is_read(meter: LoopStallMeter) -> None:
    with serving(answer_after_s=0.1) as port:
        # blocked 1.5 s against a 0.5 s timeout: asyncio.timeout would fire on wake
        assert await ask(port, timeout_s=0.5, block_s=1.5) == b"pong\n"
    await asyncio.sleep(0.1)  # the sampler notes the stall when its own turn comes
    assert meter.longest_since_wall(time.time() - 10) >= 1.4


async def test_a_plain_asyncio_timeout_blames_the_peer_for_the_same_stall() -> None:
    """The failure this module exists for, shown with the stdlib timeout."""
    with serving(answer_after_s=0.1) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                writer.write(b"ping\n")
                await writer.drain()
                time.sleep(1.5)  # the stall this test is about
                await reader.readline()
        writer.close()


def stalled_and_running_s(meter: LoopStallMeter, t0: float) -> tuple[float, float]:
    """Loop seconds since loop time `t0`: how many the meter counted as stalls (this test's
    own block, or a loaded machine's), and how many the loop ran. The timeout promises a
    bound on the second; wall time alone would blame the machine's load on the code."""
    now = asyncio.get_running_loop().time()
    stalled = meter.stalled_loop_s(t0, now)
    return stalled, now - t0 - stalled


async def test_a_silent_peer_still_times_out_on_time_when_the_loop_runs(meter: LoopStallMeter) -> None:
    with serving(answer_after_s=None) as port:
        t0 = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await ask(port, timeout_s=0.4)
        _, running_s = stalled_and_running_s(meter, t0)
        assert 0.35 < running_s < 1.0, running_s


async def test_a_silent_peer_times_out_after_the_stall_plus_the_timeout(meter: LoopStallMeter) -> None:
    with serving(answer_after_s=None) as port:
        t0 = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await ask(port, timeout_s=0.4, block_s=1.0)
        stalled_s, running_s = stalled_and_running_s(meter, t0)
        assert stalled_s >= 0.95, stalled_s  # the block, counted as a stall (not as the peer's silence)
        assert 0.35 < running_s < 1.0, running_s  # then the timeout, of running time


async def test_without_a_meter_the_deadline_still_excuses_its_own_lateness() -> None:
    with serving(answer_after_s=0.1) as port:
        assert await ask(port, timeout_s=0.5, block_s=1.5) == b"pong\n"


async def test_the_hard_cap_ends_a_wait_however_stalled(meter: LoopStallMeter) -> None:
    # counted, not timed: each step stalls the loop >= 0.15 s, so the 0.6 s cap has passed
    # after 4 steps; the expiry lands within the next turns of the loop, whatever the load
    steps = 0
    with pytest.raises(TimeoutError):
        async with wire_timeout(0.2, max_s=0.6):
            while steps < 40:  # a loop that is stalled nearly all the time
                steps += 1
                time.sleep(0.15)  # the stall this test is about
                await asyncio.sleep(0)
    assert steps <= 4 + 3, steps


def test_covered_seconds_count_overlaps_once() -> None:
    assert covered_s([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)], 0.5, 5.5) == pytest.approx(3.0)
    assert covered_s([], 0.0, 10.0) == 0.0


def test_a_timeline_answers_like_a_direct_sweep_over_its_spans() -> None:
    import random

    from infertop.collectors.process.loop_stalls import StallTimeline

    def sweep(spans: list[tuple[float, float]], t0: float, t1: float) -> float:
        covered, reach = 0.0, t0
        for start, end in sorted(spans):
            start, end = max(start, reach), min(end, t1)
            if end > start:
                covered, reach = covered + end - start, end
        return covered

    rng = random.Random(7)
    spans = [(t := rng.uniform(0, 100), t + rng.uniform(0, 2)) for _ in range(300)]
    timeline = StallTimeline(spans)
    for _ in range(500):
        a, b = sorted((rng.uniform(-5, 105), rng.uniform(-5, 105)))
        assert timeline.covered_s(a, b) == pytest.approx(sweep(spans, a, b), abs=1e-9)


async def _keep_busy(until: float, tasks: int = 2, slice_s: float = 0.004) -> None:
    """Saturate the loop the way a monitor parsing pages does: many short CPU-bound
    callbacks back to back, none of which holds the loop anywhere near MIN_STALL_S."""

    async def worker() -> None:
        while time.monotonic() < until:
            end = time.perf_counter() + slice_s
            while time.perf_counter() < end:
                pass
            await asyncio.sleep(0)

    await asyncio.gather(*(worker() for _ in range(tasks)))


async def test_a_saturated_loop_is_a_stall_though_no_wake_is_late_by_much(meter: LoopStallMeter) -> None:
    start = time.time()
    await _keep_busy(time.monotonic() + 1.0)
    await asyncio.sleep(0.1)  # the sampler's own turn
    # no wake was 20 ms late (2 slices of 4 ms a turn), yet the loop had no free time
    assert meter.longest_since_wall(start) < 1.0
    assert meter.stalled_wall_s(start, time.time()) >= 0.7


async def test_work_waiting_behind_a_saturated_loop_is_not_wire_time(meter: LoopStallMeter) -> None:
    """A page read in many small steps (as a 300 KB answer is, chunk by chunk) while the
    loop is saturated by other work takes far longer than its timeout in wall time; none
    of that is the peer's."""
    busy = asyncio.ensure_future(_keep_busy(time.monotonic() + 1.5))
    t0 = time.monotonic()
    async with wire_timeout(0.4):
        for _ in range(100):  # each step waits a turn of the busy loop (~8 ms)
            await asyncio.sleep(0)
    assert time.monotonic() - t0 > 0.6  # it really took longer than the timeout
    await busy


async def test_a_silent_peer_still_times_out_while_the_loop_is_saturated(meter: LoopStallMeter) -> None:
    busy = asyncio.ensure_future(_keep_busy(time.monotonic() + 1.0))
    with serving(answer_after_s=None) as port:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await ask(port, timeout_s=0.4)
        # excused while saturated (the busy second), then the timeout's own time on an idle
        # loop; that it ends at all is the raise above (the test's timeout bounds a hang)
        assert time.monotonic() - t0 > 1.0
    await busy


@contextlib.contextmanager
def sharing_one_cpu_with_a_spinner() -> Iterator[None]:
    """This process and a spinning child on one CPU: a host whose cores others saturate.
    The loop then gets about half the wall time, never the 90 % of a CPU that marks a
    period saturated by its own work."""
    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(spinner.pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        yield
    finally:
        os.sched_setaffinity(0, before)
        spinner.kill()
        spinner.wait()


@pytest.mark.skipif(runqueue_wait_s() is None, reason="this kernel gives no schedstat for a thread")
async def test_a_busy_loop_on_a_contended_cpu_is_a_stall(meter: LoopStallMeter) -> None:
    with sharing_one_cpu_with_a_spinner():
        start = time.time()
        cpu_at, wall_at = time.process_time(), time.monotonic()
        await _keep_busy(time.monotonic() + 1.0)
        share = (time.process_time() - cpu_at) / (time.monotonic() - wall_at)
        await asyncio.sleep(0.1)
    assert share < 0.8, f"the spinner left this process {share:.0%} of the CPU: no contention"
    # the loop had no free time though it had only part of the CPU: stalled all the same
    assert meter.stalled_wall_s(start, time.time()) >= 0.7


async def test_a_finished_wire_timeout_leaves_no_garbage_for_the_collector() -> None:
    """Each request runs in a `wire_timeout`: 384 a second at 128 nodes. What one leaves
    behind must go when it ends (reference counting), not wait in a reference cycle for
    the garbage collector (it held the Timeout, its task and the task's result: ~7k
    objects a frame for the paced collector to find)."""
    import gc

    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            async with wire_timeout(1.0):
                await asyncio.sleep(0)
        assert gc.collect() == 0
    finally:
        gc.enable()
