"""128 nodes × 8 GPUs of realistic pages, scraped at 1 s by a monitor in its own process.

The demo serves its cluster from one process (`infertop demo --serve-only --nodes 128`,
realistic pages: 8 DP vLLM engines a node, dcgm-exporter's default counters,
node_exporter of a host with 36 interfaces: ~530 KB a node a second, ~68 MB/s in all);
a Monitor runs in another (`benchmarks/monitor_child.py`: collection and evaluation as
`infertop record` runs them) and reports its CPU, its tick times, how old each node's
newest sample is, and which nodes it ever showed stale, unreachable or in error (none
should be: the cluster is healthy, its trouble is scripted verdicts, not outages). The
monitor runs twice: with the parse fast path, and with the exact path (before issue 15).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import Row

ROOT = Path(__file__).resolve().parent.parent
NODES = 128
WARMUP_S = 15.0
MEASURE_S = 45.0
COMMAND = "python -m benchmarks.run_all bench_realistic"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(nodes: int, pages: str) -> Iterator[tuple[Path, int]]:
    """`infertop demo --serve-only` of this tree in a child process: (layout, pid)."""
    with tempfile.TemporaryDirectory() as tmp:
        layout = Path(tmp) / "demo.toml"
        proc = subprocess.Popen(
            [sys.executable, "-m", "infertop", "demo", "--serve-only", "--nodes", str(nodes), "--pages", pages,
             "--layout-out", str(layout)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 60
            while not layout.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the demo did not start")
                time.sleep(0.1)
            yield layout, proc.pid
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)


def monitor_run(nodes: int = NODES, pages: str = "realistic", exact: bool = False,
                warmup_s: float = WARMUP_S, measure_s: float = MEASURE_S) -> dict[str, Any]:
    """One measured run: the monitor's figures, and the serving process's CPU."""
    with serving(nodes, pages) as (layout, server_pid), tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "monitor.json"
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.monitor_child", str(layout), str(warmup_s), str(measure_s), str(out),
             *(["--exact"] if exact else [])],
            env=_env(), cwd=ROOT,
        )
        time.sleep(warmup_s)
        server0, wall0 = _cpu_s(server_pid), time.monotonic()
        time.sleep(measure_s)
        server_pct = 100 * (_cpu_s(server_pid) - server0) / (time.monotonic() - wall0)
        if child.wait(120) != 0:
            raise RuntimeError("the monitor run failed")
        result: dict[str, Any] = json.loads(out.read_text())
    result["server_cpu_pct"] = server_pct
    result["load_average"] = os.getloadavg()[0]  # other work on the machine (1 min)
    return result


def _figure(value: float | None, unit: str = "") -> str:
    """A measured figure, or "none" where the run never got one (no sample arrived)."""
    if value is None or value != value:  # None or NaN
        return "none"
    return f"{value:.2f}{unit}"


def _rows(label: str, r: dict[str, Any]) -> list[Row]:
    met = r["nodes_not_ok"] == 0
    worst = r["age_s_worst_median"]
    return [
        Row(f"{label}: monitor CPU (% of one core) / demo server CPU (%); machine load average",
            f"{r['cpu_pct']:.0f} / {r['server_cpu_pct']:.0f}; {r['load_average']:.1f}", "—", "info", COMMAND),
        Row(f"{label}: Monitor.tick (ms, median / p99 of {r['ticks']})",
            f"{_figure(r['tick_ms_median'])} / {_figure(r['tick_ms_p99'])}", "—", "info", COMMAND),
        Row(f"{label}: newest-sample age (s, median over nodes and ticks / worst node, median tick / worst)",
            f"{_figure(r['age_s_median'])} / {_figure(worst)} / {_figure(r['age_s_worst'])}", "< 1 s",
            "met" if worst is not None and worst == worst and worst < 1.0 else "missed", COMMAND),
        Row(f"{label}: nodes ever shown stale / unreachable / in error (node-ticks)",
            f"{r['nodes_not_ok']} of {r['nodes']} ({r['node_ticks_not_ok']})"
            + (f"; commonest: {r['commonest_problem']}" if r["commonest_problem"] else ""), "0",
            "met" if met else "missed", COMMAND),
    ]


def run() -> list[Row]:
    rows: list[Row] = []
    for label, exact in ((f"{NODES} nodes, realistic pages, fast path", False),
                         (f"{NODES} nodes, realistic pages, exact path", True)):
        rows += _rows(label, monitor_run(exact=exact))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
