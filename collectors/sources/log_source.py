"""The log source: an engine's log on this machine, followed like the probe follows it.

A local node's `engine.log` (collectors/sources/routing.py gives it to this source) has its engine
figures read from that file by the same `LogWatch` the SSH probe runs on remote nodes
(collectors/probe/logs.py), so local and remote logs are parsed by one code path.
`log_watch_config` is also what the SSH source sends to the probe: plain JSON, no code.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from infertop.collectors.probe.logs import LogWatch
from infertop.collectors.sample import EngineSample, NodeSample
from infertop.collectors.sources.routing import route_layout
from infertop.collectors.sources.source import PollingSource
from infertop.layouts.model import EngineConfig, Layout


def log_watch_config(engine: EngineConfig, layout: Layout) -> dict[str, Any] | None:
    """The JSON-able `LogWatch` config for a node's engine log, or None without a log."""
    if engine.log is None and engine.log_command is None:
        return None
    sets = engine.log_pattern_sets
    return {
        "path": engine.log,
        "command": engine.log_command,
        "pattern_sets": sets,
        "user_patterns": {
            name: [p.model_dump() for p in layout.log_patterns[name]]
            for name in sets
            if name in layout.log_patterns
        },
        "interval_s": engine.log_interval_s,
        "decode_passes": engine.log_decode_passes,
        "follow_symlink_out": engine.log_follow_symlink_out,
    }


CLOSE_WAIT_S = 1.0


class LogReadBusy(RuntimeError):
    """The last read has not returned yet (the poll reports it as the log's error)."""


class LogSource(PollingSource):
    kind = "log"

    def __init__(self, node: str, config: dict[str, Any], interval_s: float, timeout_s: float | None = None):
        super().__init__([node], interval_s, timeout_s)
        self.node = node
        self.config = config
        self._watch: LogWatch | None = None
        self._lock = threading.Lock()  # a timed-out poll's thread may still be reading

    def read(self, now: float) -> tuple[dict[str, Any], list[str]]:
        """One reading (blocking file I/O: call from a thread).

        A read still stuck from an earlier poll (a hung file system) is not queued behind:
        each queued one would hold a worker thread, and the pool is shared by every source.
        """
        if not self._lock.acquire(blocking=False):
            raise LogReadBusy("the previous read of the engine log has not returned")
        try:
            if self._watch is None:
                self._watch = LogWatch(self.config)
            return self._watch.read(now)
        finally:
            self._lock.release()

    async def poll(self) -> Sequence[NodeSample]:
        now = time.time()
        engine, notes = await asyncio.to_thread(self.read, now)
        return [
            NodeSample(
                node=self.node, source=self.kind, taken_at=now, engine=EngineSample(**engine), notes=notes
            )
        ]

    async def close(self) -> None:
        # a read stuck in the file system keeps its thread; closing does not wait for it
        if not await asyncio.to_thread(self._lock.acquire, True, CLOSE_WAIT_S):
            return
        try:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
        finally:
            self._lock.release()


def local_log_sources(layout: Layout) -> list[LogSource]:
    """A log source for every node whose engine log collectors/sources/routing.py gives to `log`
    (a local node's log file or command)."""
    sources = []
    for route in route_layout(layout).read_by("log"):
        assert route.node.engine is not None
        config = log_watch_config(route.node.engine, layout)
        assert config is not None  # the route names a log only where the engine has one
        sources.append(LogSource(route.name, config, layout.cluster.interval_s))
    return sources
