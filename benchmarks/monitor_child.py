"""A Monitor in a process of its own, on a layout, for a while; its figures as JSON.

    python -m benchmarks.monitor_child LAYOUT WARMUP_S MEASURE_S OUT.json [--exact] [--unpaced]

Collection, evaluation and ticking as `infertop record` runs them (no record file, no
viewer). After the warm-up it measures, for MEASURE_S: its own CPU time, every tick's
duration, every node's age (the newest sample's) and status at each tick, and which
nodes were ever shown stale, unreachable or in error. `--exact` turns the parse fast
path off (the exact path, as before issue 15); `--unpaced` leaves garbage collection to
the thresholds (`infertop record` paces it: collectors.process.gc_pacing).
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import infertop.collectors.pages.exposition as exposition
from infertop.collectors.process.gc_pacing import PacedCollector
from infertop.collectors.process.gctune import tune_gc
from infertop.collectors.sources.source import PollingSource
from infertop.layouts import load_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot


async def measure(layout_path: Path, warmup_s: float, measure_s: float, paced: bool = True) -> dict[str, Any]:
    monitor = Monitor(load_layout(layout_path))
    ticks: list[float] = []
    ages: list[float] = []
    worst_ages: list[float] = []
    not_ok: dict[str, int] = {}
    errors: dict[str, int] = {}
    measuring = False
    tick = monitor.tick

    rounds: list[float] = []  # how long each poll of the scrape source took, wall
    phases: list[float] = []  # when in its interval each tick began

    def timed_tick(now: float | None = None) -> Snapshot:
        start = time.perf_counter()
        snapshot = tick(now)
        if measuring:
            ticks.append(time.perf_counter() - start)
            phases.append(time.time() % monitor.layout.cluster.interval_s)
        return snapshot

    def round_done(source: PollingSource) -> None:
        if measuring and source.round_started_at is not None and source.round_finished_at is not None:
            rounds.append(source.round_finished_at - source.round_started_at)

    def seen(snapshot: Snapshot) -> None:
        if not measuring:
            return
        tick_ages = [n.age_s for n in snapshot.nodes if n.age_s is not None]
        ages.extend(tick_ages)
        worst_ages.append(max(tick_ages, default=float("nan")))
        for node in snapshot.nodes:
            if node.status != "ok":
                not_ok[node.name] = not_ok.get(node.name, 0) + 1
                why = f"{node.status}: {node.error or ''}"[:80]
                errors[why] = errors.get(why, 0) + 1

    monitor.tick = timed_tick  # type: ignore[method-assign]
    for source in monitor.sources:
        if isinstance(source, PollingSource):
            source.round_listeners.append(round_done)
    monitor.listeners.append(seen)
    # garbage-collector pauses by generation: a full collection stops the loop
    gc_ms: dict[str, list[float]] = {"0": [], "1": [], "2": []}
    gc_started = [0.0]

    def gc_timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        elif measuring:
            gc_ms[str(info["generation"])].append((time.perf_counter() - gc_started[0]) * 1e3)

    gc.callbacks.append(gc_timer)
    if paced:  # as `infertop record` does
        collector = PacedCollector(freeze=True)
        monitor.listeners.append(collector.after_frame)
        collector.install()
    await monitor.start()
    try:
        await asyncio.sleep(warmup_s)
        measuring = True
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(measure_s)
        cpu_s, wall_s = time.process_time() - cpu0, time.monotonic() - wall0
        measuring = False
    finally:
        await monitor.stop()
    ticks.sort()
    return {
        "nodes": len(monitor.state.nodes),
        "cpu_pct": 100 * cpu_s / wall_s,
        "ticks": len(ticks),
        "tick_ms_median": 1e3 * statistics.median(ticks) if ticks else None,
        "tick_ms_p99": 1e3 * ticks[min(len(ticks) - 1, int(0.99 * len(ticks)))] if ticks else None,
        "age_s_median": statistics.median(ages) if ages else None,
        "age_s_worst": max(worst_ages) if worst_ages else None,
        "age_s_worst_median": statistics.median(worst_ages) if worst_ages else None,
        "nodes_not_ok": len(not_ok),
        "node_ticks_not_ok": sum(not_ok.values()),
        "commonest_problem": max(errors, key=errors.__getitem__) if errors else None,
        "poll_s_median": statistics.median(rounds) if rounds else None,
        "poll_s_max": max(rounds) if rounds else None,
        "tick_phase_median": statistics.median(phases) if phases else None,
        "gc_pauses": {g: (len(v), round(sum(v)), round(max(v, default=0.0), 1)) for g, v in gc_ms.items()},
    }


def main(argv: list[str]) -> int:
    layout, warmup, seconds, out = Path(argv[1]), float(argv[2]), float(argv[3]), Path(argv[4])
    if "--exact" in argv:
        exposition.FAST_PATH = False
    tune_gc()  # as the `infertop` entry point does
    result = asyncio.run(measure(layout, warmup, seconds, paced="--unpaced" not in argv))
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
