"""A frame waits for the round of readings it belongs to.

Sources read at whole seconds and the monitor ticks half an interval later; when the
readings take longer than that (128 realistic nodes on 2 cores take ~0.6 s to read), a
tick on time would show the previous round's figures, over an interval old. Real
exporters (prometheus_client registries over HTTP) answer here 0.6 of an interval after
each request; every frame must still show samples less than one interval old, and a
node that never answers must not hold the frame past TICK_LATEST_PHASE of the interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from infertop.collectors.sources.cadence import TICK_LATEST_PHASE
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.prometheus_server import SimNode
from tests.support.waiting import until_async

INTERVAL_S = 1.0
SLOW_ANSWER_S = 0.6  # past the half-interval tick slot, within the poll's deadline


class DelayedExporter:
    """A node's pages over HTTP, each answer sent `delay_s` after its request (None:
    never answers within a poll)."""

    def __init__(self, name: str, delay_s: float) -> None:
        registry = SimNode(name).registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(delay_s)
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[dict[str, DelayedExporter]]:
    made = {
        "decode-01": DelayedExporter("decode-01", SLOW_ANSWER_S),
        "decode-02": DelayedExporter("decode-02", SLOW_ANSWER_S),
        "decode-03": DelayedExporter("decode-03", 0.05),
        "decode-04": DelayedExporter("decode-04", 30.0),  # never in time: times out every poll
    }
    try:
        yield made
    finally:
        for server in made.values():
            server.close()


def monitor_for(servers: dict[str, DelayedExporter]) -> Monitor:
    nodes = "".join(
        f'[[nodes]]\nname = "{name}"\nrole = "decode"\ngpus = 8\n'
        f'metrics = ["http://127.0.0.1:{s.port}/metrics"]\n\n'
        for name, s in servers.items()
    )
    return Monitor(parse_layout(
        f'[cluster]\nname = "phase"\ninterval_s = {INTERVAL_S}\nwindow_s = 5\n\n'
        f"[pricing]\ngpu_hour_usd = 2.0\n\n{nodes}"
    ))


async def test_each_frame_shows_its_own_round_even_when_readings_are_slow(
    servers: dict[str, DelayedExporter],
) -> None:
    monitor = monitor_for(servers)
    frames: list[tuple[float, Snapshot]] = []
    monitor.listeners.append(lambda snap: frames.append((time.time(), snap)))
    await monitor.start()
    try:
        await until_async(lambda: len(frames) >= 3, 30, "the first frames, a steady cadence")
        start = len(frames)
        await asyncio.sleep(5 * INTERVAL_S)  # measured: how many frames, and at which phase, in 5 intervals
    finally:
        await monitor.stop()
    steady = frames[start:]
    assert len(steady) >= 4
    ages: dict[str, list[float]] = {"decode-01": [], "decode-02": [], "decode-03": []}
    for published_at, snap in steady:
        by_name = {n.name: n for n in snap.nodes}
        for name, seen in ages.items():
            age = by_name[name].age_s
            assert age is not None
            seen.append(age)
        # ticks after the slow answers are in, and never past the latest phase
        phase = published_at % INTERVAL_S
        assert 0.5 * INTERVAL_S <= phase <= TICK_LATEST_PHASE * INTERVAL_S + 0.25, phase
    # the slow nodes' newest sample: read around 0.3 s (the request/answer midpoint),
    # shown at ~0.6 s, not the previous second's (which would be ~1.3 s old)
    for name in ("decode-01", "decode-02"):
        assert max(ages[name]) < INTERVAL_S, (name, ages[name])
        assert statistics.median(ages[name]) < 0.6 * INTERVAL_S, (name, ages[name])
    assert max(ages["decode-03"]) < INTERVAL_S
    # the node that never answers in time held no frame past the latest phase (above),
    # and is shown for what it is
    assert {n.name: n.status for n in steady[-1][1].nodes}["decode-04"] != "ok"
