"""Reading parsed pages into samples: what a scrape does after `parse_exposition`.

`bench_parse` times the parse; this times the step after it, on the demo's realistic
pages (infertop/demo/realistic.py, realistic_hosts.py) parsed as `collectors.sources.scrape`
parses them: dcgm-exporter and node_exporter (the collectors the demo's layout asks
for) into GPU and port samples (`parts_from_exporter`), the engine page into an
`EngineSample` (`engine_sample_from_exposition`), with and without its latency buckets.
Timings are the best CPU time of several rounds (this process's, so other processes on
a busy machine do not count), per page, and what 128 nodes cost a second at 1 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from benchmarks.common import Row
from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import Exposition, parse_exposition
from infertop.collectors.pages.profiles import BUNDLED_PROFILES, engine_sample_from_exposition
from infertop.demo import realistic, realistic_hosts
from infertop.demo.node_collectors import INFERTOP_COLLECTORS, only_collectors
from infertop.demo.scenario import IB_PORTS, SimCluster

COMMAND = "python -m benchmarks.run_all bench_parts"
NODES = 128
# the ports the demo's layout expects on a node (`Endpoint.keep_nics`)
KEEP_NICS = frozenset([*IB_PORTS, "eth0", "bond0"])


def best_ms(fn: Callable[[], object], rounds: int = 20, inner: int = 20) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(inner):
            fn()
        best = min(best, (time.process_time() - start) / inner * 1e3)
    return best


def indexes() -> dict[str, tuple[Exposition, Callable[[Exposition], object]]]:
    """What is read, as the scrape source parses it, and how."""
    node = SimCluster(16, started_at=time.time() - 600).nodes["decode-01"]
    now = time.time()
    profile = BUNDLED_PROFILES["deepinfer"]
    exporters = frozenset(EXPORTER_WANTED)
    node_page = only_collectors(realistic_hosts.node_exporter_page(node, now), INFERTOP_COLLECTORS)
    engine_page = realistic.engine_page(node, now)

    def parts(index: Exposition) -> object:
        return parts_from_exporter(index, KEEP_NICS)

    def engine(index: Exposition) -> object:
        return engine_sample_from_exposition(index, profile)

    return {
        "dcgm-exporter, 8 GPUs": (parse_exposition(realistic_hosts.dcgm_page(node, now), wanted=exporters), parts),
        "node_exporter, 36 interfaces": (parse_exposition(node_page, wanted=exporters), parts),
        "engine page with latency buckets": (parse_exposition(engine_page, wanted=profile.wanted), engine),
        "engine page without latency buckets": (
            parse_exposition(engine_page, wanted=profile.wanted_without_latency), engine),
    }


def measure() -> dict[str, float]:
    return {what: best_ms(lambda i=index, r=read: r(i)) for what, (index, read) in indexes().items()}


def run() -> list[Row]:
    measured = measure()
    rows = [Row(f"read the parsed realistic {what} into samples (ms)", f"{ms:.3f}", "—", "info", COMMAND)
            for what, ms in measured.items()]
    # at the scrape's cadence, latency buckets 1 round in 3 (collectors.sources.scrape.latency_every_rounds)
    engine_ms = (measured["engine page with latency buckets"]
                 + 2 * measured["engine page without latency buckets"]) / 3
    per_node = measured["dcgm-exporter, 8 GPUs"] + measured["node_exporter, 36 interfaces"] + engine_ms
    rows.append(Row(f"the same, {NODES} nodes × 3 pages at 1 s, buckets 1 round in 3 (ms of CPU a second)",
                    f"{per_node * NODES:.0f}", "—", "info", COMMAND))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value}")
