"""What a source is: a long-running task that emits `NodeSample`s.

Streaming sources (the SSH probe) emit whenever a line arrives; polling sources (local,
HTTP scrape, Prometheus) derive from `PollingSource`, which reschedules itself only after
a poll has finished (polls never overlap) and bounds every poll with a timeout. A failure
becomes an error sample for the nodes concerned, never an exception out of `run`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from infertop.collectors.process.loop_stalls import wire_timeout
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.cadence import delay_to_boundary
from infertop.collectors.sources.prom_detail import DetailPlan

Emit = Callable[[NodeSample], None]
# a poll that ends less than this share of an interval past the next reading instant
# reads again at once (see PollingSource.run)
CATCH_UP_SHARE = 0.4
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendState:
    """A metrics backend a source reads nodes through, as it stood at the last round: said
    once for the cluster (Snapshot.backends), never blamed on the nodes it serves."""

    name: str  # "prometheus http://prom:9090" (credentials never shown)
    behind_s: float | None = None  # how far its newest sample trailed the wall clock
    error: str | None = None  # why it did not answer the last round; None: it answered
    since: float | None = None  # unix time it stopped answering (with `error`)
    # the nodes only it can show: while it is down they are unknown, not stale or unreachable
    nodes: frozenset[str] = frozenset()
    # the word its nodes get while it is down: "backend down", or "shard down" where a
    # layout names several backends
    role: str = "backend"
    note: str | None = None  # something else worth a line (duplicate series collapsed)
    # back lately ("back after 12 s down", "restarted 4 s ago", "config reloaded 3 s ago"),
    # and its nodes not scraped since: unknown while they wait for it, not stale
    settling: str | None = None
    waiting: frozenset[str] = frozenset()


class Source(ABC):
    """Produces samples for `nodes` until cancelled."""

    #: short kind name, shown on screen ("local", "ssh", "scrape", "prom", …)
    kind: str = "source"

    def __init__(self, nodes: Sequence[str]):
        self.nodes = list(nodes)
        # where readings older than those already emitted go (a backfill that arrives
        # after live readings): merged behind them in time order. Set by the Fleet.
        self.emit_history: Emit | None = None

    @abstractmethod
    async def run(self, emit: Emit) -> None:
        """Run until cancelled. Must not raise: failures are emitted as error samples."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Called once after `run` is cancelled."""

    def backend_states(self) -> list[BackendState]:
        """The metrics backends this source reads through, as of its last round (empty for
        a source that reads the nodes themselves)."""
        return []

    def want_detail(self, nodes: Collection[str]) -> None:  # noqa: B027 - optional hook
        """The nodes whose detail is wanted every tick (in view, flagged by a verdict): a
        source that reads detail for only some nodes each tick (the prom source) reads
        these every tick. Other sources read every node whole."""

    def detail_read(self) -> DetailPlan | None:
        """Whose detail the last round read; None: every node's, whole."""
        return None

    def stall_spans_wall(self, since: float) -> list[tuple[float, float]]:
        """Wall-clock spans since `since` in which a process of this source other than the
        monitor's own could not read (a scrape worker's loop stood still or was
        saturated, or the worker was silent): the monitor's lateness, excused like its
        own loop's stalls (monitor.monitor). Empty for a source in the monitor's process."""
        return []

    def error_sample(self, node: str, message: str) -> NodeSample:
        return NodeSample(node=node, source=self.kind, taken_at=time.time(), error=message)


class RoundSource(Source):
    """A source that reads its nodes in rounds at the wall-clock instants of
    `interval_s` (collectors.sources.cadence) and says when each round is in: the monitor's frame
    waits for the round of its instant (monitor.monitor)."""

    def __init__(self, nodes: Sequence[str], interval_s: float):
        super().__init__(nodes)
        self.interval_s = interval_s
        # the newest finished round: when it started and when its samples were all emitted
        self.round_started_at: float | None = None
        self.round_finished_at: float | None = None
        self.round_listeners: list[Callable[[RoundSource], None]] = []

    def round_done(self, started_at: float, finished_at: float) -> None:
        self.round_started_at, self.round_finished_at = started_at, finished_at
        for listener in self.round_listeners:
            listener(self)


class PollingSource(RoundSource):
    """A source read by polling every `interval_s`, each poll bounded by `timeout_s`."""

    def __init__(self, nodes: Sequence[str], interval_s: float, timeout_s: float | None = None):
        super().__init__(nodes, interval_s)
        self.timeout_s = timeout_s if timeout_s is not None else max(interval_s * 0.9, 0.5)
        # while `run` runs: a poll may hand over a node's sample as soon as it is read
        # (`poll` then returns only the rest), so a late node does not hold the others back
        self.emit_early: Emit | None = None

    @abstractmethod
    async def poll(self) -> Sequence[NodeSample]:
        """One reading of every node this source covers."""

    def timed_out(self) -> list[NodeSample]:
        """What a poll that ran past `timeout_s` says: an error on every node it reads (a
        source reading through a backend says it on the backend instead)."""
        message = f"{self.kind}: timed out after {self.timeout_s:g} s"
        return [self.error_sample(n, message) for n in self.nodes]

    async def run(self, emit: Emit) -> None:
        self.emit_early = emit
        while True:
            started_at = time.time()
            try:
                # a timeout context, not wait_for: on Python 3.11 wait_for swallows a cancel
                # that arrives as the poll finishes, and the source would never stop. The
                # poll still runs as a task of its own, scheduled as it was under wait_for.
                # Measured on the wire: time the monitor's own loop stood still does not
                # count (collectors.process.loop_stalls), or a starved monitor blames the nodes.
                poll = asyncio.ensure_future(self.poll())
                async with wire_timeout(self.timeout_s):
                    samples = await poll
            except TimeoutError:
                samples = self.timed_out()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken source must not take the app down
                log.debug("%s poll failed", self.kind, exc_info=True)
                samples = [
                    self.error_sample(n, f"{self.kind}: {type(exc).__name__}: {exc}")
                    for n in self.nodes
                ]
            for sample in samples:
                emit(sample)
            self.round_done(started_at, time.time())
            # read at wall-clock boundaries (see collectors.sources.cadence); a poll slower than
            # the interval goes on at the next boundary: never overlap, never spin. One that
            # ran only a little past the reading instant after its start reads again at
            # once: waiting for the next instant would leave that instant's frame (which
            # waits for its round, monitor.monitor) with readings over an interval old
            now = time.time()
            missed_by = now - (started_at - started_at % self.interval_s + self.interval_s)
            if 0.0 <= missed_by < CATCH_UP_SHARE * self.interval_s:
                continue
            await asyncio.sleep(delay_to_boundary(self.interval_s, now, min_delay_s=0.05 * self.interval_s))
