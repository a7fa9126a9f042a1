"""What every benchmark returns: rows for the table in BENCHMARKS.md, and small helpers."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# `make bench-scale-live` sets INFERTOP_BENCH_SCALE=1: the scale points too (1,024 nodes' memory
# over 1,000 ticks, 4,096 nodes through a backend), minutes each on 2 cores
SCALE = os.environ.get("INFERTOP_BENCH_SCALE") == "1"


@dataclass(frozen=True)
class Row:
    figure: str  # what was measured, with its unit
    value: str  # the measured value, formatted
    target: str  # the goal ("< 1 s"), or "—"
    verdict: str  # "met", "missed by …", or "info"
    command: str  # the command that produced it


def machine() -> str:
    cpus = os.cpu_count() or 0
    return f"{platform.machine()}, {cpus} cores, Python {platform.python_version()}"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p99 of 60 values is the 60th: the worst but none)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def demo_serving(nodes: int) -> Iterator[Path]:
    """`infertop demo --serve-only` in a child process; yields the layout it wrote."""
    binary = Path(sys.executable).with_name("infertop")
    with tempfile.TemporaryDirectory() as tmp:
        layout_path = Path(tmp) / "demo.toml"
        proc = subprocess.Popen(
            [str(binary), "demo", "--serve-only", "--nodes", str(nodes), "--layout-out", str(layout_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not layout_path.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the demo did not start")
                time.sleep(0.1)
            yield layout_path
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
