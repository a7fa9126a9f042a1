"""The local source: this machine through NVML, psutil and sysfs.

NVML and sysfs reads block (briefly), so each poll runs in a worker thread; the NVML
handle is opened once and kept, because `nvmlInit` costs far more than a reading.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import psutil

from infertop.collectors.probe import host as probe_host
from infertop.collectors.probe import nvidia_gpus as probe_gpus
from infertop.collectors.probe.ethtool_stats import EthtoolStats
from infertop.collectors.probe.schema import sample_from_reading
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.source import PollingSource


class LocalSource(PollingSource):
    kind = "local"

    def __init__(
        self, node: str, interval_s: float, timeout_s: float | None = None, keep_nics: Iterable[str] = ()
    ):
        super().__init__([node], interval_s, timeout_s)
        self.node = node
        # the layout's expected ports: read even when named like virtual plumbing
        self.keep_nics = frozenset(keep_nics)
        self._gpu_reader: Any = None
        self._gpu_note: str | None = None
        self._opened = False
        self._lock = threading.Lock()  # a timed-out poll's thread may still be running
        self._ethtool = EthtoolStats()  # pause frames from the drivers' ethtool statistics

    def _open(self) -> None:
        if not self._opened:
            self._gpu_reader, self._gpu_note = probe_gpus.open_gpus()
            self._opened = True
            psutil.cpu_percent(None)  # prime: the first call has no interval to measure

    def read(self) -> dict[str, Any]:
        """One reading, in the probe's JSON shape (blocking; call from a thread)."""
        with self._lock:
            self._open()
            vm = psutil.virtual_memory()
            return {
                "gpus": self._gpu_reader.read() if self._gpu_reader is not None else [],
                "nics": probe_host.read_nics(keep=self.keep_nics, ethtool=self._ethtool),
                "host": {
                    "cpu_pct": psutil.cpu_percent(None),
                    "mem_used_bytes": int(vm.total - vm.available),
                    "mem_total_bytes": int(vm.total),
                    "load1": os.getloadavg()[0],
                },
                "notes": [self._gpu_note] if self._gpu_note else [],
            }

    def _close_ethtool(self) -> None:
        with self._lock:  # after a timed-out poll's thread is done with the socket
            self._ethtool.close()

    async def poll(self) -> Sequence[NodeSample]:
        reading = await asyncio.to_thread(self.read)
        return [sample_from_reading(self.node, self.kind, reading, time.time())]

    async def close(self) -> None:
        await asyncio.to_thread(self._close_ethtool)
        if self._gpu_reader is not None:
            await asyncio.to_thread(self._gpu_reader.close)
            self._gpu_reader = None
