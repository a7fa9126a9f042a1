"""One shard of the scrape source in a process of its own (`collectors.sources.scrape_shards`).

Run as `python -m infertop.collectors.sources.scrape_worker` by the monitor, never by hand. It reads its job
from stdin (one frame: the pickled `WorkerJob`), then runs a `ScrapeSource` over its nodes
on the usual wall-clock cadence and writes framed messages to stdout: each node's sample
as soon as it is read, and each round's start and finish. It exits when stdin closes
(the monitor stopped or died) or stdout breaks.

The job goes through stdin, not argv: endpoint URLs may carry passwords, and argv is
world-readable in /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import struct
import sys
import time
from dataclasses import dataclass

from infertop.collectors.process import library_warnings
from infertop.collectors.process.loop_stalls import acquire_meter, release_meter
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.scrape import Endpoint, ScrapeSource
from infertop.collectors.sources.source import RoundSource

FRAME = struct.Struct("!I")  # each message: its length, then the pickle
WORKER_NICENESS = 5  # added to the monitor's: see main
HEARTBEAT_S = 0.25  # how often a worker sends its stalls (and so, that it is alive)


@dataclass(frozen=True)
class WorkerJob:
    targets: dict[str, list[Endpoint]]
    interval_s: float
    timeout_s: float | None = None
    latency_every: int = 1


def frame(message: object) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> object:
    """The next message; `asyncio.IncompleteReadError` at the end of the stream. Only
    ever read from the monitor or from a worker it started (same user, same code)."""
    (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
    return pickle.loads(await reader.readexactly(size))  # noqa: S301 - our own process pair


async def serve() -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    job = await read_frame(stdin)
    if not isinstance(job, WorkerJob):
        raise SystemExit("scrape worker: not a job")
    # written without blocking: a monitor that stands still a moment must not stall the
    # worker's own reading (its buffer takes what the pipe cannot yet)
    transport, _protocol = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    source = ScrapeSource(job.targets, job.interval_s, job.timeout_s, latency_every=job.latency_every)

    def send(message: object) -> None:
        if transport.is_closing():
            raise SystemExit(0)
        transport.write(frame(message))

    def emit(sample: NodeSample) -> None:
        send(("sample", sample))

    def round_done(s: RoundSource) -> None:
        send(("round", s.round_started_at, s.round_finished_at))

    source.round_listeners.append(round_done)
    # timeouts measured on the wire here too: time this worker's loop stood still (a long
    # page parsed) is not a node's
    meter = acquire_meter()

    async def report_stalls() -> None:
        """This worker's stalls, and that it is alive, every HEARTBEAT_S: its nodes' ages
        must not count the time it could not read them, as in the monitor's own process."""
        since = time.time()
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            now = time.time()
            send(("stalls", meter.spans_wall(since)))
            since = now  # a stall going on now is sent again once it has ended: spans merge

    reading = asyncio.create_task(source.run(emit))
    reporting = asyncio.create_task(report_stalls())
    try:
        await stdin.read()  # until the monitor closes it (or dies)
    finally:
        reading.cancel()
        reporting.cancel()
        await asyncio.gather(reading, reporting, return_exceptions=True)
        await source.close()
        await release_meter(meter)
        transport.close()


def main() -> None:
    library_warnings.install()  # a library's warning is not the operator's business
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    # reading pages is throughput work: where cores are short, the viewers (and the
    # monitor's frame) come first; a worker that falls behind is the monitor's lateness,
    # said and excused (collectors.sources.scrape_shards), never a node's fault
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    try:
        asyncio.run(serve())
    except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
        pass


if __name__ == "__main__":
    # through the module's own name: run as __main__, this file's WorkerJob would be
    # another class than the one the monitor pickled
    from infertop.collectors.sources import scrape_worker

    scrape_worker.main()
