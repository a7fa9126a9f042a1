"""The TUI at 1,024 nodes × 8 GPUs (8,192 GPUs), 2 s interval, on a 160x45 screen: the node
table and the fleet map (issue 34), each in its own headless run of
`benchmarks/tui_headless.py` (the real `InfertopApp`, every panel, the session record on).

The frames come from the demo's simulated cluster turned into samples in-process, so the
Monitor tick of 1,024 nodes runs on the TUI's own event loop too (reported apart): the
update figures are the TUI's work per frame, handler + every repaint it caused, in wall
time and in CPU time of the app's thread (what it costs when the machine is shared).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import Row, percentile

NODES = 1024
INTERVAL_S = 2.0
SIZE = (160, 45)
COMMAND = "python -m benchmarks.run_all bench_tui_scale"
FIRST_FRAME_S = 3.0
UPDATE_P99_MS = 50.0


def _child(view: str, warmup_s: float, seconds: float) -> dict[str, Any]:
    env = dict(os.environ, INFERTOP_BENCH_T0=repr(time.time()))
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "benchmarks.tui_headless", "--nodes", str(NODES),
         "--interval", str(INTERVAL_S), "--view", view, "--width", str(SIZE[0]), "--height", str(SIZE[1]),
         "--warmup", str(warmup_s), "--seconds", str(seconds)],
        capture_output=True, text=True, env=env, timeout=warmup_s + seconds + 180,
    )
    if out.returncode != 0:
        raise RuntimeError(f"tui_headless failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    shown = result["cells"] if view == "map" else result["rows"]
    if shown != NODES:
        raise RuntimeError(f"the {view} shows {shown} nodes, not {NODES}")
    return result


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {percentile(values, 99):.1f}"


def _verdict(ok: bool, miss: str) -> str:
    return "met" if ok else f"missed by {miss}"


def rows_for(view: str, label: str, result: dict[str, Any]) -> list[Row]:
    size = f"{NODES} nodes × 8 GPUs, {INTERVAL_S:g} s, {SIZE[0]}x{SIZE[1]}, {label}"
    first = result["first_full_frame_s"]
    p99 = percentile(result["update_ms"], 99)
    cpu_p99 = percentile(result["update_cpu_ms"], 99)
    return [
        Row(f"TUI first full frame ({size}; from launch, s)",
            "—" if first is None else f"{first:.2f}", f"< {FIRST_FRAME_S:g} s",
            "no full frame" if first is None else _verdict(first < FIRST_FRAME_S, f"{first - FIRST_FRAME_S:.2f} s"),
            COMMAND),
        Row(f"TUI update, handler + repaint ({size}; wall ms, median / p99 of {result['frames']})",
            _ms(result["update_ms"]), f"< {UPDATE_P99_MS:g} ms p99",
            _verdict(p99 < UPDATE_P99_MS, f"{p99 - UPDATE_P99_MS:.0f} ms"), COMMAND),
        Row(f"… the same in CPU time of the app's thread ({label}; ms, median / p99)",
            _ms(result["update_cpu_ms"]), f"< {UPDATE_P99_MS:g} ms p99",
            _verdict(cpu_p99 < UPDATE_P99_MS, f"{cpu_p99 - UPDATE_P99_MS:.0f} ms"), COMMAND),
        Row(f"… handler / repaint, wall ({label}; ms, median)",
            f"{statistics.median(result['apply_ms']):.1f} / {statistics.median(result['paint_ms']):.1f}",
            "—", "info", COMMAND),
        Row(f"… Monitor.tick of {NODES} nodes on the same loop ({label}; wall ms, median / p99) "
            f"/ process CPU (% of one core)",
            f"{_ms(result['tick_ms'])} / {result['cpu_share'] * 100:.0f}", "—", "info", COMMAND),
    ]


def run() -> list[Row]:
    table = _child("table", warmup_s=15.0, seconds=60.0)
    fleet_map = _child("map", warmup_s=15.0, seconds=60.0)
    return rows_for("table", "node table", table) + rows_for("map", "fleet map", fleet_map)


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
