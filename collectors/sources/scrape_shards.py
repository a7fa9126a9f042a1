"""The scrape source split over worker processes, so that reading and parsing pages uses
the machine's other cores.

Reading and parsing a realistic node's three pages costs the monitor ~4 ms of CPU; at 128
nodes a second that is ~0.5 s of one core, next to the monitor's own frame, record and
viewers (BENCHMARKS.md, "Sharded collection"). Here each worker (`collectors.sources.scrape_worker`) is a
process with its own event loop and HTTP session that runs an ordinary `ScrapeSource`
over its share of the nodes: the same wall-clock cadence, the same per-request timeouts
measured on the wire in the worker, `taken_at` stamped when the page arrived. What comes
back over its stdout is the finished `NodeSample`s (a few KB each) and each round's
start and finish, which this source passes on as its own round (the slowest worker's),
so the monitor's frame still waits for the round of its instant.

A node belongs to one worker for its life (a stable hash of its name), so its history
stays in one place. A worker that dies is started again after a second; meanwhile its
nodes get no samples (they age, as they would with a late monitor), never an error that
blames them. A worker sends its event loop's stalls every heartbeat; those, and any
stretch in which a worker was silent for two heartbeats, are the monitor's lateness
(`stall_spans_wall`): the tick takes them off its nodes' ages as it does its own loop's,
so a starved or stopped worker never makes its nodes stale or unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence

from infertop.collectors.process.loop_stalls import KEEP_S
from infertop.collectors.safe_text import inert_text, redact_text, url_secrets, whole_number
from infertop.collectors.sources.scrape import (
    Endpoint,
    ScrapeSource,
    latency_every_rounds,
    scrape_targets,
    shard_of,
)
from infertop.collectors.sources.scrape_worker import HEARTBEAT_S, WorkerJob, frame, read_frame
from infertop.collectors.sources.source import Emit, RoundSource, Source
from infertop.layouts.loader import LayoutError
from infertop.layouts.model import Layout

log = logging.getLogger(__name__)
WORKERS_ENV = "INFERTOP_SCRAPE_WORKERS"
# below this many pages a second one process reads them all with room to spare
MIN_PAGES_FOR_WORKERS = 96
PAGES_PER_WORKER = 256  # ~0.35 s of a core a second on realistic pages
RESTART_DELAY_S = 1.0
MAX_FAILED_STARTS = 3  # in a row, without a message: then read in-process
STOP_GRACE_S = 3.0
# a worker heard from longer ago than this is late (it sends its stalls every HEARTBEAT_S)
SILENT_AFTER_S = 2 * HEARTBEAT_S


class WorkersSettingError(ValueError):
    """INFERTOP_SCRAPE_WORKERS is not a whole number ≥ 0."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def scrape_workers(pages: int, cores: int | None = None, setting: str | None = None) -> int:
    """How many worker processes read `pages` pages a round: INFERTOP_SCRAPE_WORKERS when
    set (0: the monitor reads them itself), else none for a small cluster or a machine of
    two cores or fewer, else one per PAGES_PER_WORKER pages, leaving two cores to the
    monitor and a viewer.

    Two cores are left alone because of a measurement (BENCHMARKS.md, "Sharded collection"): there a
    worker reads 128 realistic nodes no fresher than the monitor itself (every core is
    already shared by the monitor, a viewer and, in the demo, the served cluster); two read
    fresher (14–19 % of node-frames a second old, not 36–39 %) but take ~125 % of a core
    with the viewer, not ~90 %, and still not every frame in its second.
    `INFERTOP_SCRAPE_WORKERS=2` makes that trade where it is wanted."""
    setting = os.environ.get(WORKERS_ENV) if setting is None else setting
    text = (setting or "").strip()
    if text:
        if (workers := whole_number(text)) is None:
            raise WorkersSettingError(f"{setting!r} is not a whole number ≥ 0 (0: no worker processes)")
        return min(workers, max(pages, 0))
    cores = usable_cores() if cores is None else cores
    if pages < MIN_PAGES_FOR_WORKERS or cores <= 2:
        return 0
    return max(1, min(cores - 2, math.ceil(pages / PAGES_PER_WORKER)))


class ShardedScrapeSource(RoundSource):
    kind = "scrape"

    def __init__(
        self,
        targets: Mapping[str, Sequence[Endpoint]],
        interval_s: float,
        workers: int,
        timeout_s: float | None = None,
        latency_every: int = 1,
    ):
        super().__init__(list(targets), interval_s)
        if workers < 1:
            raise ValueError("a sharded source needs at least one worker")
        shards: list[dict[str, list[Endpoint]]] = [{} for _ in range(workers)]
        for node, endpoints in targets.items():
            shards[shard_of(node, workers)][node] = list(endpoints)
        self.jobs = [WorkerJob(shard, interval_s, timeout_s, latency_every) for shard in shards if shard]
        # what starts a worker (a test may put a failing command here)
        self.worker_command: Sequence[str] = (
            sys.executable, "-m", "infertop.collectors.sources.scrape_worker"
        )
        self.worker_pids: list[int | None] = [None] * len(self.jobs)
        self.restarts = 0
        # each worker's newest round (started, finished)
        self._rounds: list[tuple[float, float] | None] = [None] * len(self.jobs)
        # the workers' stalls (wall clock), and when each was last heard from (None: not
        # running, or not yet heard)
        self._stalls: deque[tuple[float, float]] = deque()
        self._heard_at: list[float | None] = [None] * len(self.jobs)

    async def run(self, emit: Emit) -> None:
        workers = [asyncio.create_task(self._run_worker(i, emit)) for i in range(len(self.jobs))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                # not twice: a second cancel would cut short a worker's orderly stop
                if not task.done() and not task.cancelling():
                    task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def _heard_round(self, index: int, started_at: float, finished_at: float) -> None:
        self._rounds[index] = (started_at, finished_at)
        rounds = [r for r in self._rounds if r is not None]
        if len(rounds) == len(self._rounds):
            # the round is in when the last worker's is: the earliest start says whether
            # every worker has read this instant yet
            starts, finishes = zip(*rounds, strict=True)
            self.round_done(min(starts), max(finishes))

    async def _run_worker(self, index: int, emit: Emit) -> None:
        failed_starts = 0
        while failed_starts < MAX_FAILED_STARTS:
            heard = await self._worker_once(index, emit)
            failed_starts = 0 if heard else failed_starts + 1
            self.restarts += 1
            await asyncio.sleep(RESTART_DELAY_S)
        # a worker that cannot even start (a broken install, no processes left): this
        # shard is read in the monitor's own process, as without workers
        log.warning("scrape worker %d failed to start %d times; reading its nodes in the monitor",
                    index, MAX_FAILED_STARTS)
        self._heard_at[index] = None  # no worker to be late: the monitor reads these nodes
        job = self.jobs[index]
        source = ScrapeSource(job.targets, job.interval_s, job.timeout_s, latency_every=job.latency_every)
        source.round_listeners.append(
            lambda s: self._heard_round(index, s.round_started_at or 0.0, s.round_finished_at or 0.0))
        try:
            await source.run(emit)
        finally:
            await source.close()

    async def _worker_once(self, index: int, emit: Emit) -> bool:
        """Run one worker process until it ends; whether it sent anything."""
        heard = False
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.worker_command,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            log.warning("scrape worker %d cannot start: %s", index, exc)
            return False
        self.worker_pids[index] = proc.pid
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        relay = asyncio.create_task(self._relay_log(index, proc.stderr))
        try:
            proc.stdin.write(frame(self.jobs[index]))
            await proc.stdin.drain()
            while True:
                message = await read_frame(proc.stdout)
                heard = True
                self._heard_at[index] = time.time()
                if not isinstance(message, tuple) or not message:
                    continue
                if message[0] == "sample":
                    emit(message[1])
                elif message[0] == "round":
                    self._heard_round(index, message[1], message[2])
                elif message[0] == "stalls":
                    self._heard_stalls(message[1])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the worker went away: the caller starts another
        finally:
            # a worker gone is silent: its nodes age from its last word, excused until a
            # new one speaks (and at most monitor.evaluation.figures.MAX_EXCUSE_S)
            await self._stop(proc)
            # its stderr ends with it: read to the end, so its pipes are all closed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_GRACE_S):
                    await asyncio.shield(relay)
            relay.cancel()
            self.worker_pids[index] = None
        log.warning("scrape worker %d stopped (exit code %s)", index, proc.returncode)
        return heard

    def _heard_stalls(self, spans: list[tuple[float, float]]) -> None:
        now = time.time()
        self._stalls.extend((float(start), float(end)) for start, end in spans)
        while self._stalls and self._stalls[0][1] < now - KEEP_S:
            self._stalls.popleft()

    def stall_spans_wall(self, since: float) -> list[tuple[float, float]]:
        """The workers' own stalls, and each span in which a worker that had been heard
        from said nothing for longer than two heartbeats (blocked, starved, or dead and
        being started again): none of it is its nodes' doing."""
        spans = [span for span in self._stalls if span[1] >= since]
        now = time.time()
        for heard_at in self._heard_at:
            if heard_at is not None and now - heard_at > SILENT_AFTER_S:
                spans.append((heard_at, now))
        return spans

    async def _relay_log(self, index: int, stream: asyncio.StreamReader) -> None:
        """The worker's own complaints, into the monitor's log: inert, and without the
        passwords its URLs may carry."""
        secrets = [s for eps in self.jobs[index].targets.values() for ep in eps for s in url_secrets(ep.url)]
        async for line in stream:
            text = redact_text(line.decode("utf-8", "replace").rstrip(), secrets)
            log.warning("scrape worker %d: %s", index, inert_text(text, max_len=500))

    @staticmethod
    async def _stop(proc: asyncio.subprocess.Process) -> None:
        """Close its stdin (it stops reading and exits), then make sure."""
        if proc.stdin is not None:
            proc.stdin.close()  # also once it has exited: the last open pipe keeps its transport
        if proc.returncode is not None:
            return
        try:
            async with asyncio.timeout(STOP_GRACE_S):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())  # reaped, so its transport closes
            raise


def scrape_source_for(layout: Layout) -> Source | None:
    """One source for every node read over HTTP: in the monitor's own process, or, for a
    cluster whose pages would crowd it, split over worker processes."""
    targets = scrape_targets(layout)
    if not targets:
        return None
    try:
        workers = scrape_workers(sum(len(endpoints) for endpoints in targets.values()))
    except WorkersSettingError as exc:
        raise LayoutError("environment", WORKERS_ENV, str(exc)) from None
    interval_s = layout.cluster.interval_s
    latency_every = latency_every_rounds(interval_s, layout.cluster.window_s)
    if workers:
        return ShardedScrapeSource(targets, interval_s, workers, latency_every=latency_every)
    return ScrapeSource(targets, interval_s, latency_every=latency_every)
