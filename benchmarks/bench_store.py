"""Cost of the session record per tick: one SQLite (WAL) transaction with the snapshot of a
128-node cluster (8 GPUs each) and the ledger, on the monitor's own thread."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row
from infertop.collectors.sample import EngineSample, GpuSample, NodeSample
from infertop.layouts.model import Layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.record.store import Recorder

NODES = 128
TICKS = 30


def run() -> list[Row]:
    layout = Layout.model_validate({
        "cluster": {"name": "bench", "interval_s": 1.0},
        "pricing": {"gpu_hour_usd": 10.0},
        "nodes": [{"name": f"n{i:03d}", "role": "decode", "gpus": 8} for i in range(NODES)],
    })
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("INFERTOP_STATE_DIR", tmp)
        recorder = Recorder.open(layout, Path(tmp) / "bench.sqlite", now=1.8e9)
        monitor = Monitor(layout, sources=[], clock=lambda: 1.8e9)  # the write is timed by hand below
        emit = monitor.fleet._emit
        write_ms: list[float] = []
        for t in range(TICKS):
            now = 1.8e9 + t
            for i in range(NODES):
                emit(NodeSample(node=f"n{i:03d}", source="bench", taken_at=now,
                                gpus=[GpuSample(index=g, util_pct=50.0, power_w=600.0) for g in range(8)],
                                engine=EngineSample(generation_tokens_total=1000.0 * t)))
            snap = monitor.tick(now)
            start = time.perf_counter()
            recorder.store.write_tick(snap, now)
            write_ms.append((time.perf_counter() - start) * 1000)
        recorder.close()
        size_kib = (Path(tmp) / "bench.sqlite").stat().st_size / 1024 / TICKS
    median = statistics.median(write_ms)
    return [
        Row("session record write per tick, 128 nodes × 8 GPUs (ms, median)", f"{median:.1f}",
            "< 50 ms", "met" if median < 50 else f"missed by {median - 50:.1f} ms",
            "python -m benchmarks.run_all bench_store"),
        Row("session record size per tick, 128 nodes (KiB)", f"{size_kib:.1f}", "—", "info",
            "python -m benchmarks.run_all bench_store"),
    ]
