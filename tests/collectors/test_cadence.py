"""Wall-clock cadence: readings at whole multiples of the interval, ticks half-way between."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.cadence import delay_to_boundary
from infertop.collectors.sources.source import PollingSource
from tests.support.waiting import until_async


@pytest.mark.parametrize(
    ("interval", "now", "offset", "min_delay", "expected"),
    [
        (1.0, 100.25, 0.0, 0.0, 0.75),  # next whole second
        (1.0, 100.25, 0.5, 0.0, 0.25),  # next half second
        (1.0, 100.75, 0.5, 0.0, 0.75),
        (5.0, 12.0, 0.0, 0.0, 3.0),
        (1.0, 100.98, 0.0, 0.05, 1.02),  # too close: the boundary after
    ],
)
def test_delay_to_boundary(interval: float, now: float, offset: float, min_delay: float, expected: float) -> None:
    assert delay_to_boundary(interval, now, offset, min_delay) == pytest.approx(expected)


@given(
    st.floats(min_value=0.1, max_value=60), st.floats(min_value=0, max_value=2e9),
    st.floats(min_value=0, max_value=1),
)
def test_lands_on_a_boundary(interval: float, now: float, phase: float) -> None:
    offset = phase * interval
    delay = delay_to_boundary(interval, now, offset, 0.0)
    assert 0 < delay <= interval + 1e-6
    landed = (now + delay - offset) / interval
    assert abs(landed - round(landed)) < 1e-4 * max(1.0, abs(landed))


class _SlowOnce(PollingSource):
    """Reads in `slow_s` once (a starved round), in no time otherwise."""

    kind = "slow-once"

    def __init__(self, interval_s: float, slow_s: float) -> None:
        super().__init__(["n"], interval_s, timeout_s=5.0)  # the slow poll is not cut short
        self.slow_s = slow_s
        self.starts: list[float] = []

    async def poll(self) -> list[NodeSample]:
        self.starts.append(time.time())
        if len(self.starts) == 2:  # the first poll starts off the wall-clock grid
            await asyncio.sleep(self.slow_s)
        return [NodeSample(node="n", source=self.kind, taken_at=time.time())]


@pytest.mark.parametrize(("late_share", "catches_up"), [(0.2, True), (0.7, False)])
async def test_a_round_a_little_late_reads_again_at_once(late_share: float, catches_up: bool) -> None:
    """A poll that ends a little past the next reading instant reads again at once (the
    frame waiting for that instant gets a round); one far past it waits for the next."""
    interval = 0.5
    source = _SlowOnce(interval, slow_s=(1 + late_share) * interval)
    running = asyncio.create_task(source.run(lambda sample: None))
    try:
        await until_async(lambda: len(source.starts) >= 4, 30, "four polls", every_s=0.02)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    slow_start, after = source.starts[1], source.starts[2]
    assert slow_start % interval < 0.1  # on the grid
    gap = after - slow_start
    if catches_up:  # at once: not at the next instant, half an interval later
        assert gap == pytest.approx((1 + late_share) * interval, abs=0.1)
    else:
        assert gap == pytest.approx(2 * interval, abs=0.1)
    # and back on the grid after that
    assert source.starts[3] % interval < 0.1
