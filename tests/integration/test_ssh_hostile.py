"""The SSH source against a real SSH server (tests/support/hostile_sshd.py, its own process) whose
probe streams hostile output: parser bombs, a 10,000-lines-a-second flood, a line that
never ends. The session stays up, what is dropped is counted in a note, the cost is
bounded, and the source stops at once when cancelled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.ssh import SshSource, ssh_source_for
from infertop.layouts import load_layout
from tests.support.hostile_sshd import serving
from tests.support.waiting import until_async

pytestmark = pytest.mark.integration


def source_for(where: Path) -> SshSource:
    source = ssh_source_for(load_layout(where / "layout.toml"))
    assert source is not None
    return source


async def run_for(
    source: SshSource, seconds: float, until: Callable[[list[NodeSample]], bool] | None = None
) -> tuple[list[NodeSample], float]:
    """Samples emitted in `seconds` (or, with `until`, once they satisfy it, `seconds` at
    most); and how long cancelling the source then took."""
    samples: list[NodeSample] = []
    task = asyncio.create_task(source.run(samples.append))
    if until is None:
        await asyncio.sleep(seconds)  # measured: what the source does in this window
    else:
        await until_async(lambda: until(samples), seconds, "the samples", detail=lambda: samples[-2:])
    started = time.monotonic()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await source.close()
    return samples, time.monotonic() - started


@pytest.mark.hostile
async def test_parser_bombs_are_dropped_lines_and_the_session_stays_up(tmp_path: Path) -> None:
    # a 400-digit integer, "[" x 100000, a 5000-digit integer, each followed by a good line
    with serving("bad-lines", tmp_path):
        source = source_for(tmp_path)
        samples, _ = await run_for(source, 30, until=lambda got: len([s for s in got if s.ok]) >= 3 and any(
            "unreadable line(s) dropped" in note for note in [s for s in got if s.ok][-1].notes))
    assert source.connects["n1"] == 1  # never torn down and reconnected
    assert [s.error for s in samples if s.error] == []
    good = [s for s in samples if s.ok]
    assert len(good) >= 3
    assert any("unreadable line(s) dropped" in note for note in good[-1].notes)


@pytest.mark.hostile
async def test_a_flood_of_lines_is_coalesced(tmp_path: Path) -> None:
    # ~10,000 readings a second, each with a real engine exposition to parse
    with serving("flood", tmp_path):
        source = source_for(tmp_path)
        samples, stop_s = await run_for(source, 3.0)
    good = [s for s in samples if s.ok]
    assert 2 <= len(good) <= 3 / (source.interval_s / 2) + 2  # one per half interval at most
    assert any("came faster than the interval" in note for note in good[-1].notes)
    assert stop_s < 1.0


@pytest.mark.hostile
async def test_a_line_that_never_ends_costs_bounded_cpu(tmp_path: Path) -> None:
    with serving("no-newline", tmp_path):
        source = source_for(tmp_path)
        started = time.process_time()
        samples, stop_s = await run_for(source, 3.0)
        cpu_s = time.process_time() - started
    assert [s for s in samples if s.ok] == []
    assert cpu_s < 1.0  # the byte budget, not a spinning core (was 2.4 s of 3 s, 400 MB buffered)
    assert stop_s < 1.0
