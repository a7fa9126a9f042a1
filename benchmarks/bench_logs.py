"""Engine-log following and Ascend parsing: what they cost on the node, per probe tick.

A vLLM engine prints two stats lines per engine per 10 s, among many access-log lines;
the probe reads whatever was appended since its last tick. Targets: parsing must stay far
below the probe's 1 s tick even for a busy log (10,000 lines a second), and npu-smi parsing
is negligible next to running npu-smi itself (hundreds of ms).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import Row
from infertop.collectors.probe.logs import LogWatch
from infertop.collectors.probe.npu import parse_npu_smi_info

ROOT = Path(__file__).resolve().parent.parent
STATS = (
    "(APIServer pid=1) INFO 08-04 20:51:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 93.9 tokens/s, "
    "Avg generation throughput: 13.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
    "Prefix cache hit rate: 0.0%\n"
    "(APIServer pid=1) INFO 08-04 20:51:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.49, "
    "Accepted throughput: 9.20 tokens/s, Drafted throughput: 25.90 tokens/s, Accepted: 92 tokens, Drafted: 259 "
    "tokens, Per-position acceptance rate: 0.757, 0.622, 0.432, 0.324, 0.189, 0.108, 0.054, Avg Draft acceptance "
    "rate: 35.5%\n"
)
ACCESS = '(APIServer pid=1) INFO:     10.0.0.7:40112 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'


def _log_tick_ms(lines_per_tick: int, ticks: int = 20) -> tuple[float, float]:
    """(median ms per tick, lines parsed per s) for ticks of `lines_per_tick` new lines."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "engine.log"
        log.write_text("")
        watch = LogWatch({"path": str(log)})
        watch.read()
        chunk = (ACCESS * (lines_per_tick // 2 - 1) + STATS) if lines_per_tick > 2 else STATS
        times = []
        for i in range(ticks):
            with log.open("a") as f:
                f.write(chunk.replace("{s:02d}", f"{i % 60:02d}"))
            start = time.perf_counter()
            watch.read()
            times.append(time.perf_counter() - start)
        watch.close()
    times.sort()
    median = times[len(times) // 2]
    return median * 1000, lines_per_tick / median


def run() -> list[Row]:
    rows = []
    quiet_ms, _ = _log_tick_ms(2)
    rows.append(Row("log tick, 2 new stats lines (ms)", f"{quiet_ms:.3f}", "< 1 ms", "met" if quiet_ms < 1 else
                    f"missed by {quiet_ms - 1:.2f} ms", "python -m benchmarks.run_all bench_logs"))
    busy_ms, per_s = _log_tick_ms(10_000, ticks=10)
    rows.append(Row("log tick, 10,000 new lines (ms)", f"{busy_ms:.1f}", "< 100 ms (10 % of a 1 s tick)",
                    "met" if busy_ms < 100 else f"missed by {busy_ms - 100:.0f} ms",
                    "python -m benchmarks.run_all bench_logs"))
    rows.append(Row("log lines parsed per second", f"{per_s:,.0f}", "—", "info",
                    "python -m benchmarks.run_all bench_logs"))
    text = (ROOT / "tests" / "fixtures" / "npu" / "npu_smi_a3.txt").read_text()
    n = 500
    start = time.perf_counter()
    for _ in range(n):
        parse_npu_smi_info(text)
    us = (time.perf_counter() - start) / n * 1e6
    rows.append(Row("npu-smi info parse, 4 chips (µs)", f"{us:.0f}", "< 1,000 µs", "met" if us < 1000 else
                    "missed", "python -m benchmarks.run_all bench_logs"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
