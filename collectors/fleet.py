"""Fleet state (bounded history per node and source) and the scheduler that runs sources.

Everything here runs on the asyncio loop: sources that block (NVML, psutil, the
synchronous Prometheus client) hop to a thread inside their own `poll` and come back
before emitting, so the state is only ever touched from one thread.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from infertop.collectors.bounds import within_bounds
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.source import Source

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 1.0  # for every source to stop and close (quitting takes at most 2 s)


@dataclass
class NodeState:
    """What is known of one node: recent good samples per source, and its last error."""

    name: str
    history: int
    by_source: dict[str, deque[NodeSample]] = field(default_factory=dict)
    last_error: NodeSample | None = None
    samples_seen: int = 0
    # seconds of samples kept behind a source's newest one (None: `history` alone bounds
    # the ring). A node sample with 8 GPUs and 9 ports holds ~27 KiB, so 600 of them for
    # 128 nodes would be 2 GB; evaluation only ever reads one window back.
    retain_s: float | None = None

    def add(self, sample: NodeSample) -> None:
        self.samples_seen += 1
        if sample.error is not None:
            self.last_error = sample
            return
        ring = self.by_source.get(sample.source)
        if ring is None:
            ring = self.by_source[sample.source] = deque(maxlen=self.history)
        ring.append(sample)
        if self.retain_s is not None:
            # relative to the source's own newest time, so a node whose clock is off
            # still keeps a full window of its samples
            oldest_kept = sample.taken_at - self.retain_s
            while len(ring) > 1 and ring[0].taken_at < oldest_kept:
                ring.popleft()

    def add_history(self, sample: NodeSample) -> None:
        """A good reading older than the source's newest (a backfill that came in after
        live readings): inserted in time order, so the newest stays last (the node's age
        and every window read it); what the ring would not keep is not inserted."""
        ring = self.by_source.get(sample.source)
        if not ring or sample.taken_at > ring[-1].taken_at:
            self.add(sample)  # nothing as new kept: it is simply the next reading
            return
        if sample.error is not None or (
            self.retain_s is not None and sample.taken_at < ring[-1].taken_at - self.retain_s
        ):
            return
        times = [s.taken_at for s in ring]
        at = bisect.bisect_left(times, sample.taken_at)
        if times[at] == sample.taken_at:
            return  # that reading is kept already
        if len(ring) == ring.maxlen:
            if at == 0:
                return  # older than everything a full ring keeps
            ring.popleft()
            at -= 1
        ring.insert(at, sample)

    @property
    def last_ok_at(self) -> float | None:
        times = [ring[-1].taken_at for ring in self.by_source.values() if ring]
        return max(times) if times else None

    @property
    def error(self) -> str | None:
        """The last error, while it is newer than every good sample."""
        if self.last_error is None:
            return None
        ok_at = self.last_ok_at
        if ok_at is not None and ok_at >= self.last_error.taken_at:
            return None
        return self.last_error.error

    def window(self, source: str, since: float, min_count: int = 0) -> list[NodeSample]:
        """Samples of one source taken at or after `since`, oldest first.

        With `min_count`, reaches back past `since` until that many samples are in (when
        the ring has them): a rate needs two readings even when the window is shorter than
        the gap between them.
        """
        ring = self.by_source.get(source)
        if not ring:
            return []
        out: list[NodeSample] = []
        for s in reversed(ring):
            if s.taken_at < since and len(out) >= min_count:
                break
            out.append(s)
        out.reverse()
        return out

    def latest(self) -> list[NodeSample]:
        """The newest good sample of each source, newest first."""
        newest = [ring[-1] for ring in self.by_source.values() if ring]
        return sorted(newest, key=lambda s: s.taken_at, reverse=True)


class FleetState:
    def __init__(self, node_names: Iterable[str], history: int = 600, retain_s: float | None = None):
        self.history = history
        self.retain_s = retain_s
        self.nodes: dict[str, NodeState] = {n: NodeState(n, history, retain_s=retain_s) for n in node_names}

    def add(self, sample: NodeSample) -> None:
        state = self.nodes.get(sample.node)
        if state is None:  # a discovered node (e.g. from Prometheus)
            state = self.nodes[sample.node] = NodeState(sample.node, self.history, retain_s=self.retain_s)
        state.add(sample)

    def add_history(self, sample: NodeSample) -> None:
        state = self.nodes.get(sample.node)
        if state is None:
            state = self.nodes[sample.node] = NodeState(sample.node, self.history, retain_s=self.retain_s)
        state.add_history(sample)


class Fleet:
    """Runs the sources as tasks and feeds their samples into a `FleetState`."""

    def __init__(self, state: FleetState, sources: Sequence[Source]):
        self.state = state
        self.sources = list(sources)
        self._tasks: list[asyncio.Task[None]] = []
        self.listeners: list[Callable[[NodeSample], None]] = []

    def _emit(self, sample: NodeSample) -> None:
        # the one door into the monitor: what no hardware can report becomes unknown here,
        # before fleet state, the ledger or any view sees it (collectors.bounds)
        sample = within_bounds(sample)
        self.state.add(sample)
        for listener in self.listeners:
            listener(sample)

    def ingest(self, sample: NodeSample) -> None:
        """Take one sample exactly as a running source hands it in (bounds, state,
        listeners): the public door for whoever feeds samples without a source, e.g. tests."""
        self._emit(sample)

    def _merge_history(self, sample: NodeSample) -> None:
        # not to the listeners: they follow each part forward in time (the ledger's
        # tallies would take an older counter for a reset)
        self.state.add_history(within_bounds(sample))

    async def start(self) -> None:
        for source in self.sources:
            source.emit_history = self._merge_history
            task = asyncio.create_task(self._guard(source), name=f"source:{source.kind}")
            self._tasks.append(task)

    async def _guard(self, source: Source) -> None:
        try:
            await source.run(self._emit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # run() must not raise; if it does, say so on every node
            log.exception("source %s crashed", source.kind)
            for node in source.nodes:
                self._emit(source.error_sample(node, f"{source.kind} crashed: {exc}"))

    async def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Cancel every source and close them all; within about `timeout_s` in all.

        Bounded: a command must be gone within 2 s of SIGINT / SIGTERM, and a source stuck
        past its cancellation (a blocking call in a thread that will not return) or a close
        that hangs must not hold that up.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            _, stuck = await asyncio.wait(self._tasks, timeout=timeout_s / 2)
            for task in stuck:
                log.warning("source %s did not stop within %g s", task.get_name(), timeout_s / 2)
        for task in self._tasks:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: no "exception never retrieved" noise
        self._tasks.clear()
        closing = [asyncio.ensure_future(self._close(source)) for source in self.sources]
        if closing:
            _, unclosed = await asyncio.wait(closing, timeout=max(deadline - loop.time(), 0.05))
            for task in unclosed:
                task.cancel()

    @staticmethod
    async def _close(source: Source) -> None:
        try:
            await source.close()
        except Exception:  # closing is best effort: the process is going
            log.debug("closing source %s failed", source.kind, exc_info=True)
