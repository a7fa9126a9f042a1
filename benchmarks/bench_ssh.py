"""SSH fleet at scale: 16, 64, 128 real sshd hosts in network namespaces, 1 s interval.

For each size: build the namespace cluster (tests/support/netns.py, management links only), run
one `SshSource` over all hosts, wait until every host streams, then for MEASURE_S seconds
tick once a second at the instants `Monitor` ticks (half an interval after the probes'
wall-clock reading instants, collectors.sources.cadence) and record the age of the oldest
"newest sample" across the fleet
(the figure that says whether any node's view is stale) and this process's CPU share
(the client: asyncio loop, asyncssh crypto, JSON and pydantic per line). The node side
(sshd + probe, all processes in the namespaces) is measured too, per node per tick.

Then the probe's own CPU per tick (bundled, run here) against the floor of a design that
spawns a subprocess per tick, which is what polling `nvidia-smi` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row
from infertop.collectors.probe.bundle import probe_script
from infertop.collectors.sample import NodeSample
from infertop.collectors.sources.cadence import TICK_PHASE, delay_to_boundary
from infertop.collectors.sources.ssh import SshNode, SshSource
from infertop.layouts.model import SshOptions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the suite's servers and pages
from tests.support.netns import NetnsCluster, _ns_pids, missing_requirements  # noqa: E402

SIZES = (16, 64, 128)
INTERVAL_S = 1.0
MEASURE_S = 15
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
CMD = "python -m benchmarks.run_all bench_ssh"
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _ns_cpu_s(cluster: NetnsCluster) -> float:
    """utime + stime of every process now in the cluster's host namespaces."""
    total = 0
    for host in cluster.hosts:
        for pid in _ns_pids(host.ns):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
    return total / TICKS_PER_S


async def _fleet(size: int, workdir: Path) -> list[Row]:
    cluster = NetnsCluster(size, workdir, data_links=False)
    built_at = time.monotonic()
    await asyncio.to_thread(cluster.build)
    build_s = time.monotonic() - built_at
    try:
        options = SshOptions(
            config=str(cluster.ssh_config), known_hosts=str(cluster.known_hosts), python=PYTHON
        )
        nodes = [SshNode(h.alias, h.alias) for h in cluster.hosts]
        source = SshSource(nodes, INTERVAL_S, options)
        newest: dict[str, float] = {}
        worst_gap = [0.0]  # longest time between two readings of one node, while measuring
        measuring = [False]
        errors: list[str] = []

        def emit(sample: NodeSample) -> None:
            if sample.error is None:
                if measuring[0] and sample.node in newest:
                    worst_gap[0] = max(worst_gap[0], sample.taken_at - newest[sample.node])
                newest[sample.node] = sample.taken_at
            else:
                errors.append(f"{sample.node}: {sample.error}")

        cpu0, wall0 = time.process_time(), time.monotonic()
        task = asyncio.create_task(source.run(emit))
        try:
            while len(newest) < size and time.monotonic() - wall0 < 120:
                await asyncio.sleep(0.05)
            connect_s = time.monotonic() - wall0
            connect_cpu_s = time.process_time() - cpu0
            if len(newest) < size:
                raise RuntimeError(f"only {len(newest)}/{size} hosts streamed: {errors[:3]}")
            await asyncio.sleep(2 * INTERVAL_S)  # let the probes' first-second startup pass
            ages: list[float] = []
            node_cpu0 = await asyncio.to_thread(_ns_cpu_s, cluster)
            cpu1, wall1 = time.process_time(), time.monotonic()
            measuring[0] = True
            for _ in range(MEASURE_S):
                # at the instants `Monitor` ticks: half an interval after the wall-clock
                # boundaries the probes read at (collectors.sources.cadence)
                await asyncio.sleep(delay_to_boundary(
                    INTERVAL_S, time.time(), offset_s=TICK_PHASE * INTERVAL_S, min_delay_s=0.2 * INTERVAL_S
                ))
                now = time.time()
                ages.append(max(now - newest.get(n.name, 0.0) for n in nodes))
            client_share = (time.process_time() - cpu1) / (time.monotonic() - wall1)
            node_cpu_s = await asyncio.to_thread(_ns_cpu_s, cluster) - node_cpu0
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await source.close()
    finally:
        await asyncio.to_thread(cluster.teardown)
    worst = max(ages)
    per_node_tick_ms = 1000 * node_cpu_s / (size * MEASURE_S)
    return [
        Row(
            f"ssh {size} hosts @1 s: oldest newest sample, worst of {MEASURE_S} ticks (median)",
            f"{worst:.3f} s ({statistics.median(ages):.3f} s)",
            "< 1 s",
            "met" if worst < 1.0 else f"missed by {1000 * (worst - 1.0):.0f} ms (phase: a reading was due)",
            CMD,
        ),
        Row(
            f"ssh {size} hosts @1 s: longest gap between two readings of one node",
            f"{worst_gap[0]:.3f} s",
            "< 2 s (stale)",
            "met" if worst_gap[0] < 2.0 else "missed",
            CMD,
        ),
        Row(
            f"ssh {size} hosts @1 s: client CPU (share of one core, steady state)",
            f"{100 * client_share:.1f} %",
            "< 25 %",
            "met" if client_share < 0.25 else f"missed by {100 * (client_share - 0.25):.1f} points",
            CMD,
        ),
        Row(
            f"ssh {size} hosts: connect all (wall, client CPU); namespaces built in {build_s:.1f} s",
            f"{connect_s:.1f} s, {connect_cpu_s:.1f} s CPU",
            "—",
            "info",
            CMD,
        ),
        Row(
            f"ssh {size} hosts: node side CPU per node per tick (sshd + probe, no GPU)",
            f"{per_node_tick_ms:.2f} ms",
            "—",
            "info",
            CMD,
        ),
    ]


def _probe_cpu_per_tick_ms(ticks: int = 200) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "probe.py"
        script.write_text(probe_script())
        out = subprocess.run(
            [PYTHON, "-I", str(script), json.dumps({"interval_s": 0.001, "count": ticks})],
            cwd=tmp, capture_output=True, text=True, check=True, timeout=120,
        ).stdout.splitlines()
    first, last = json.loads(out[0]), json.loads(out[-1])
    return 1000 * (last["probe_cpu_s"] - first["probe_cpu_s"]) / (len(out) - 1)


def _spawn_cpu_per_tick_ms(spawns: int = 100) -> float:
    """CPU of one subprocess per tick that reads the same NIC counters (`cat` of sysfs)."""
    files = [str(p) for p in Path("/sys/class/net").glob("*/statistics/[rt]x_bytes")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    self_before = time.process_time()
    for _ in range(spawns):
        subprocess.run(["cat", *files], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    parent_s = time.process_time() - self_before  # fork/exec cost paid by the poller
    return 1000 * (child_s + parent_s) / spawns


def run() -> list[Row]:
    rows: list[Row] = []
    probe_ms = _probe_cpu_per_tick_ms()
    spawn_ms = _spawn_cpu_per_tick_ms()
    rows.append(
        Row("probe CPU per tick (bundled, all NICs + host, no GPU here)", f"{probe_ms:.3f} ms",
            "near NVML floor (tens of µs per GPU)", "info", CMD)
    )
    rows.append(
        Row("one subprocess per tick (spawn `cat` of NIC counters), CPU", f"{spawn_ms:.2f} ms",
            "—", f"info: {spawn_ms / probe_ms:.0f}× the probe tick; nvidia-smi itself: 26.5 ms on H200",
            CMD)
    )
    why = missing_requirements()
    if why is not None:
        rows.append(Row("ssh fleet benchmark", "skipped", "—", f"info: {why}", CMD))
        return rows
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            try:
                rows.extend(asyncio.run(_fleet(size, Path(tmp) / f"fleet{size}")))
            except Exception as exc:  # one size failing still reports the others
                rows.append(Row(f"ssh {size} hosts", "failed", "—", f"error: {exc}"[:200], CMD))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} [{row.target}] {row.verdict}")
