"""One scrape poll of the simulated cluster over real HTTP: how long, and where the time goes.

The demo serves 128 nodes (3 pages each: engine, dcgm-exporter with 8 GPUs,
node_exporter) from its own process (`infertop demo --serve-only`, as in a real
cluster the exporters are not in the monitor's process); the scrape source reads them
all. The
poll must finish well inside the default 1 s interval, or the display lags. Parsing is
measured on its own, per page, with and without the wanted-names filter, because
prometheus_client's label parser is the dominant cost.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import Row, demo_serving
from infertop.collectors.pages.exporters import EXPORTER_WANTED
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import BUNDLED_PROFILES
from infertop.collectors.sources.scrape import ScrapeSource, scrape_targets
from infertop.demo.render import dcgm_page, engine_page, node_exporter_page
from infertop.demo.scenario import SimCluster
from infertop.layouts import load_layout

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support
from tests.support.vllm_dp_page import vllm_dp_page

NODES = 128
POLLS = 5
COMMAND = "python -m benchmarks.run_all bench_scrape"
BIN = Path(sys.executable).with_name("infertop")


async def _polls(source: ScrapeSource) -> tuple[list[float], list[str]]:
    """Each poll's wall time, and the errors of the nodes a poll could not read (a
    saturated machine: the row says so, as a miss, rather than the benchmark failing)."""
    times, errors = [], []
    try:
        for _ in range(POLLS):
            start = time.perf_counter()
            samples = await source.poll()
            times.append(time.perf_counter() - start)
            errors += [s.error or "no reading" for s in samples if not s.ok]
    finally:
        await source.close()
    return times, errors


def _parse_ms(text: str, wanted: frozenset[str] | set[str] | None, repeat: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        parse_exposition(text, wanted=wanted)
    return (time.perf_counter() - start) / repeat * 1e3


def run() -> list[Row]:
    with demo_serving(NODES) as layout_path:
        targets = scrape_targets(load_layout(layout_path))
        # a generous poll budget: this measures the cost, not the deadline
        source = ScrapeSource(targets, interval_s=10.0)
        times, errors = asyncio.run(_polls(source))
    median_s = statistics.median(times)
    if errors:
        verdict = f"missed: {len(errors)} of {NODES * POLLS} node reads failed ({errors[0][:80]}; load {os.getloadavg()[0]:.1f})"
    else:
        verdict = "met" if median_s < 1.0 else f"missed by {median_s - 1.0:.2f} s"
    vllm = BUNDLED_PROFILES["deepinfer"]
    node = SimCluster(16, started_at=time.time() - 60).nodes["decode-01"]
    now = time.time()
    pages = {
        "engine": (engine_page(node, now), vllm.wanted),
        "dcgm": (dcgm_page(node, now), EXPORTER_WANTED),
        "node_exporter": (node_exporter_page(node, now), EXPORTER_WANTED),
    }
    rows = [
        Row(
            f"scrape poll, {NODES} nodes × 3 pages over HTTP (median of {POLLS})",
            f"{median_s * 1e3:.0f} ms",
            "< 1000 ms (one interval)",
            verdict,
            COMMAND,
        )
    ]
    # what a real DeepInfer decode node serves: vLLM's own families × 8 DP engines
    real_page, _ = vllm_dp_page(8)
    pages["vLLM 8-engine (stock definitions, ~320 KB)"] = (real_page, vllm.wanted)
    for name, (text, wanted) in pages.items():
        full, filtered = _parse_ms(text, None), _parse_ms(text, wanted)
        rows.append(
            Row(
                f"parse one {name} page ({len(text.splitlines())} lines): all / wanted names only",
                f"{full:.2f} / {filtered:.2f} ms",
                "—",
                "info",
                COMMAND,
            )
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} ({row.verdict})")
