"""The probe's stream, read as the SSH source reads it, from real child processes writing
hostile output to a pipe; and the probe line parser on hostile lines.

`ProbeLines` reads any `read(n)` coroutine: here a subprocess pipe's, on a node an SSH
channel's. The SSH source end to end (real SSH protocol) is in test_ssh_hostile.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator

import pytest

from infertop.collectors.probe.schema import BadReading, parse_reading_line, reading_sample
from infertop.collectors.sources.ssh import ProbeLines

GOOD = json.dumps({"t": 1.0, "gpus": [{"index": 0, "util_pct": 50.0}]})


@contextlib.asynccontextmanager
async def child(script: str) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        # to EOF: a pipe whose reading is paused (buffer full) would keep wait() waiting
        await proc.communicate()


async def read_for(lines: ProbeLines, seconds: float, gap_s: float = 0.0) -> list[bytes]:
    """Every line `next_line` hands out within `seconds`, asking again after `gap_s`."""
    got: list[bytes] = []
    pump = asyncio.create_task(lines.pump())
    try:
        async with asyncio.timeout(seconds):
            while (line := await lines.next_line()) is not None:
                got.append(line)
                await asyncio.sleep(gap_s)
    except TimeoutError:
        pass
    finally:
        pump.cancel()
    return got


@pytest.mark.hostile
async def test_a_line_that_never_ends_is_dropped_and_memory_stays_bounded() -> None:
    # 200 MB without a newline, then a good line: the good line arrives, the long one is
    # counted once, and no more than the line bound was ever held
    script = (
        "import sys\n"
        "chunk = b'x' * 65536\n"
        "for _ in range(3200): sys.stdout.buffer.write(chunk)\n"
        f"sys.stdout.buffer.write(b'\\n' + {GOOD.encode()!r} + b'\\n')\n"
    )
    async with child(script) as proc:
        assert proc.stdout is not None
        lines = ProbeLines(proc.stdout.read, max_line_bytes=1_000_000, max_bytes_per_s=1e12)
        got = await read_for(lines, 20.0)
    assert got == [GOOD.encode()]
    assert lines.overlong == 1
    assert len(lines._lines._partial) == 0
    assert any("1 over-long line(s) dropped" in n for n in lines.dropped())


@pytest.mark.hostile
async def test_an_endless_line_costs_bounded_reading() -> None:
    """A node streaming a line with no newline forever: the reader takes at most its byte
    budget per second (SSH flow control holds the rest back), not 100 % of a core."""
    script = "import sys\nchunk = b'x' * 65536\nwhile True: sys.stdout.buffer.write(chunk)\n"
    async with child(script) as proc:
        assert proc.stdout is not None
        budget = 4_000_000.0
        read_bytes = 0

        stdout = proc.stdout

        async def counting_read(n: int) -> bytes:
            nonlocal read_bytes
            data = await stdout.read(n)
            read_bytes += len(data)
            return data

        lines = ProbeLines(counting_read, max_line_bytes=1_000_000, max_bytes_per_s=budget)
        started = time.process_time()
        got = await read_for(lines, 2.0)
        cpu_s = time.process_time() - started
    assert got == []
    assert read_bytes <= budget * 3.2  # one second's burst + two seconds' refill (+ a read)
    assert cpu_s < 1.0


@pytest.mark.hostile
async def test_ten_thousand_lines_a_second_are_coalesced_to_the_newest() -> None:
    script = (
        "import sys, time, json\n"
        "i = 0\n"
        "end = time.monotonic() + 1.5\n"
        "while time.monotonic() < end:\n"
        "    batch = ''.join(json.dumps({'seq': i + k}) + '\\n' for k in range(100))\n"
        "    sys.stdout.write(batch); sys.stdout.flush(); i += 100\n"
        "    time.sleep(0.01)\n"
        "print(json.dumps({'seq': i, 'last': True}), flush=True)\n"
    )
    async with child(script) as proc:
        assert proc.stdout is not None
        lines = ProbeLines(proc.stdout.read, max_bytes_per_s=1e12)
        # the consumer takes a line every 0.25 s, as the SSH source does every half interval
        got = await read_for(lines, 10.0, gap_s=0.25)
    seqs = [json.loads(line)["seq"] for line in got]
    assert len(got) <= 10  # ~1.5 s / 0.25 s, plus the last line: not 10,000s
    assert seqs == sorted(seqs)  # always the newest line, never an old one
    assert json.loads(got[-1]).get("last") is True  # the final line is never lost
    sent = seqs[-1] + 1
    assert sent >= 1000  # thousands, even on a loaded machine
    assert lines.superseded + len(got) == sent  # every line either read or counted
    assert any("came faster than the interval" in n for n in lines.dropped())


async def test_a_pipe_that_fails_raises_from_next_line() -> None:
    async def broken(n: int) -> bytes:
        raise ConnectionResetError("gone")

    lines = ProbeLines(broken)
    pump = asyncio.create_task(lines.pump())
    with pytest.raises(ConnectionResetError):
        await lines.next_line()
    await pump


# ---------------------------------------------------------------------------- the parser

BAD_LINES = {
    "400-digit t": b'{"t": 1' + b"0" * 400 + b"}",
    "400-digit t with a log time": b'{"t": 1' + b"0" * 400 + b', "engine": {"log_last_line_at": 5}}',
    "400-digit log time": b'{"t": 5, "engine": {"log_last_line_at": 1' + b"0" * 400 + b"}}",
    "5000-digit integer": b'{"t": 1' + b"0" * 5000 + b"}",
    "nested 100000 deep": b"[" * 100_000,
    "nested objects 100000 deep": b'{"a":' * 100_000,
    "error nested 900 deep": b'{"error": ' + b"[" * 900 + b"]" * 900 + b', "gpus": ' + b"[" * 5000 + b"}",
    "truncated": b'{"t": 1.0, "gpus": [{"index": 0',
    "not an object": b'"just a string"',
    "a list": b"[1, 2, 3]",
    "invalid utf-8": b'\xff\xfe{"t": 1}',
    "gpus not a list": b'{"t": 1.0, "gpus": 5}',
    "t a string": b'{"t": "yesterday"}',
    "t infinite": b'{"t": 1e999}',
}


@pytest.mark.hostile
@pytest.mark.parametrize("line", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_every_bad_line_is_a_bad_reading_and_nothing_else(line: bytes) -> None:
    with pytest.raises(BadReading) as caught:
        reading_sample("n1", "ssh", parse_reading_line(line), time.time())
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300


def test_a_good_line_still_parses() -> None:
    sample = reading_sample("n1", "ssh", parse_reading_line(GOOD.encode()), 100.0)
    assert sample.error is None and sample.gpus is not None and sample.gpus[0].util_pct == 50.0
