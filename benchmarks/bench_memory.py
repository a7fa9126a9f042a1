"""Resident memory across a long session, time-compressed: does it plateau?

A child process drives `Monitor.tick` with a fake clock, one simulated second per tick,
as fast as it can: 128 nodes × 8 GPUs of the demo's simulated cluster, the session
record on (as in the TUI), and the TUI's own sparkline history fed every frame. A day
is 86,400 ticks, too long for this 2-core machine (~0.1 s a tick here), so it runs
`TICKS`: many times what every bounded buffer in the process holds (fleet rings: one
window, 13 samples, `cluster.history` = 600 at most; sparklines: 60 frames). RSS is
printed at intervals; the slope over the second half says whether it plateaus, and is
extrapolated to a day. Before the fleet kept one window only, RSS grew 3.4 MiB a tick
to ~2.1 GiB at 600 ticks (BENCHMARKS.md, "Fleet rings bounded by the window").

The second run is the scale point of issue 34: a 1,024-node × 8-GPU monitor over 1,000
ticks, the same way (simulated samples fed through `Fleet.ingest`, a fake clock one
simulated second a tick, as fast as the machine goes, the record on), RSS at the start
(the monitor built, before tick 1) and after 100, 500 and 1,000 ticks.

    python -m benchmarks.run_all bench_memory
    INFERTOP_BENCH_SCALE=1 python -m benchmarks.run_all bench_memory   # with the scale point
    python -m benchmarks.bench_memory --child --nodes 1024 --ticks 1000 --at 100,500,1000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import SCALE, Row, rss_bytes

NODES = 128
TICKS = 1200
EVERY = 100
# the 1,024-node run takes ~30 min of CPU on 2 cores: `make bench-scale-live`, not `make bench`
SCALE_NODES = 1024
SCALE_TICKS = 1000
SCALE_AT = (100, 500, 1000)
DAY_TICKS = 86_400
TARGET_MB = 300.0
COMMAND = "python -m benchmarks.run_all bench_memory"
MB = 1024 * 1024


def child(ticks: int, every: int, nodes: int = NODES, at: tuple[int, ...] = ()) -> None:
    from benchmarks.synthetic import SimCluster, cluster_samples, demo_layout
    from infertop.collectors.process.gctune import tune_gc
    from infertop.monitor.monitor import Monitor
    from infertop.monitor.record.store import Recorder
    from infertop.tui.history import History

    tune_gc()  # as `infertop` does at its entry point
    t0 = 1.8e9
    cluster = SimCluster(nodes, started_at=t0 - 600)
    layout = demo_layout(cluster, reservation_start=t0)
    now = t0
    tmp = tempfile.mkdtemp(prefix="infertop-mem-")
    recorder = Recorder.open(layout, Path(tmp) / "mem.sqlite", now=now)
    monitor = Monitor(layout, sources=[], clock=lambda: now, recorder=recorder)
    history = History(60)
    monitor.listeners.append(history.record)
    gc.collect()
    points: list[tuple[int, float, float]] = [(0, rss_bytes() / MB, 0.0)]  # (tick, rss MiB, seconds)
    start = time.perf_counter()
    for i in range(1, ticks + 1):
        now = t0 + i
        for sample in cluster_samples(cluster, now):
            monitor.fleet.ingest(sample)
        monitor.tick(now)
        if (i in at) if at else (i % every == 0):
            gc.collect()
            points.append((i, rss_bytes() / MB, time.perf_counter() - start))
            print(json.dumps({"tick": i, "rss_mib": round(points[-1][1], 1)}), file=sys.stderr, flush=True)
    recorder.close()
    retained = max(len(ring) for state in monitor.state.nodes.values() for ring in state.by_source.values())
    record_bytes = os.path.getsize(recorder.path)
    shutil.rmtree(tmp, ignore_errors=True)
    json.dump({"points": points, "ring_len": retained, "record_bytes": record_bytes}, sys.stdout)


def slope_mib_per_1000(points: list[tuple[int, float, float]]) -> float:
    """Least-squares slope of RSS over the second half of the run, MiB per 1,000 ticks."""
    half = [p for p in points if p[0] > 0][len(points) // 2:]
    n = len(half)
    mx = sum(p[0] for p in half) / n
    my = sum(p[1] for p in half) / n
    var = sum((p[0] - mx) ** 2 for p in half)
    return 0.0 if var == 0 else sum((p[0] - mx) * (p[1] - my) for p in half) / var * 1000


def _child_run(*args: str, timeout_s: float) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_memory", "--child", *args],
        capture_output=True, text=True, check=True, timeout=timeout_s,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def scale_rows(nodes: int = SCALE_NODES, ticks: int = SCALE_TICKS, at: tuple[int, ...] = SCALE_AT) -> list[Row]:
    """The 1,024-node monitor over 1,000 ticks: RSS at the start, 100, 500 and 1,000 ticks."""
    load = os.getloadavg()[0]
    result = _child_run("--nodes", str(nodes), "--ticks", str(ticks), "--at", ",".join(map(str, at)), timeout_s=3600)
    points = [tuple(p) for p in result["points"]]  # type: ignore[attr-defined]
    trace = ", ".join(f"{'start' if t == 0 else int(t)}: {r:.0f}" for t, r, _ in points)
    seconds = points[-1][2]
    return [Row(f"RSS of a {nodes:,}-node × 8-GPU monitor over {ticks:,} compressed ticks, "
                "record on (MiB, by tick)", trace, "plateau",
                "met" if points[-1][1] <= points[-2][1] * 1.05 else "missed",
                "python -m benchmarks.bench_memory --child --nodes 1024 --ticks 1000 --at 100,500,1000"),
            Row(f"the {nodes:,}-node memory run: time, ticks/s, load (1-min) at its start",
                f"{seconds:.0f} s, {ticks / seconds:.2f}/s, load {load:.1f}", "—",
                f"info (session record {result['record_bytes'] / MB:.0f} MiB)",  # type: ignore[operator]
                COMMAND)]


def run() -> list[Row]:
    result = _child_run("--ticks", str(TICKS), timeout_s=600)
    points = [tuple(p) for p in result["points"] if p[0] > 0]  # type: ignore[attr-defined]
    peak = max(p[1] for p in points)
    slope = slope_mib_per_1000(points)  # type: ignore[arg-type]
    day = points[-1][1] + max(slope, 0.0) * (DAY_TICKS - points[-1][0]) / 1000
    trace = ", ".join(f"{int(t)}: {r:.0f}" for t, r, _ in points[:: max(1, len(points) // 6)])
    seconds = points[-1][2]
    return [
        Row(f"RSS over {TICKS} compressed 1 s ticks, {NODES} nodes × 8 GPUs, record on (MiB, peak)",
            f"{peak:.0f}", f"< {TARGET_MB:g} MB", "met" if peak < TARGET_MB else
            f"missed by {peak - TARGET_MB:.0f} MB", COMMAND),
        Row("RSS slope over the second half (MiB per 1,000 ticks) → a day of 86,400 ticks (MiB)",
            f"{slope:+.2f} → {day:.0f}", "plateau, < 300 MB a day",
            "met" if day < TARGET_MB and slope < 1.0 else "missed", COMMAND),
        Row("RSS by tick (MiB)", trace, "—", "info", COMMAND),
        Row("samples kept per node (longest fleet ring); session record size (MiB)",
            f"{result['ring_len']}; {result['record_bytes'] / MB:.0f}", "—",  # type: ignore[operator]
            f"info ({seconds:.0f} s for {TICKS} ticks)", COMMAND),
        *(scale_rows() if SCALE else []),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--child", action="store_true")
    p.add_argument("--ticks", type=int, default=TICKS)
    p.add_argument("--every", type=int, default=EVERY)
    p.add_argument("--nodes", type=int, default=NODES)
    p.add_argument("--at", default="", help="ticks to read RSS at, e.g. 100,500,1000 (default: every --every)")
    args = p.parse_args(argv)
    if args.child:
        child(args.ticks, args.every, args.nodes, tuple(int(t) for t in args.at.split(",") if t))
        return 0
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
