"""The monitor's own cost at 128 / 1,024 / 1,250 / 4,096 nodes × 8 GPUs through the prom
source, measured apart from any simulated cluster or backend: a replay server
(benchmarks/prom_replay) answers the Prometheus HTTP API from a real Prometheus's
recorded answers (8 demo nodes, realistic pages, infertop's recording rules), relabelled
into the fleet's size, in a process of its own. This process is the monitor alone: the
real `Monitor` with its prom source, ticking at the layout's 2 s, each snapshot encoded
once as the channel does for its viewers.

Per size: client CPU a tick (this process, every thread: decoding, grouping, building
samples, judging, building and encoding the snapshot), the poll round's wall time and
Monitor.tick's (median / p99), the snapshot's encoding, RSS at the end, and the nodes
shown stale / unreachable / in error (a replayed fleet has none).

    make bench-scale                                  # every size, rows into BENCHMARKS.md
    INFERTOP_BENCH_SCALE_NODES=1250 python -m benchmarks.bench_scale
    # on a loaded machine: fewer ticks, a longer wait (s)
    INFERTOP_BENCH_SCALE_TICKS=10 INFERTOP_BENCH_SCALE_TIMEOUT_S=3000 INFERTOP_BENCH_SCALE_NODES=1024 python -m …
    python -m benchmarks.prom_replay.profile_tick 1250 5 --profile OUT.pstats   # where it goes
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import SCALE, Row, percentile, rss_bytes
from benchmarks.prom_replay.server import Replay, synthetic_names
from infertop.collectors.sources.cadence import delay_to_boundary
from infertop.demo.backends import free_port

# `make bench` takes the 128-node point only; `make bench-scale` every size
_DEFAULT_SIZES = "128,1024,1250,4096" if SCALE else "128"
SIZES = tuple(int(n) for n in os.environ.get("INFERTOP_BENCH_SCALE_NODES", _DEFAULT_SIZES).split(","))
TICKS = int(os.environ.get("INFERTOP_BENCH_SCALE_TICKS", "20"))
WARMUP = 4  # the first ticks: history backfill, first sight of every node
COMMAND = "make bench-scale (INFERTOP_BENCH_SCALE=1 python -m benchmarks.run_all bench_scale)"
TARGET_CPU_S = {1250: 0.4, 4096: 1.0}
ROUND_TIMEOUT_S = 120.0


def layout_for(replay: Replay, nodes: int, url: str) -> str:
    """The recorded layout, its [prometheus] url the replay's and its nodes the fleet's."""
    from infertop.layouts.loader import parse_layout

    recorded = parse_layout(replay.layout_text)
    head = replay.layout_text.split("[[nodes]]", 1)[0]
    # the client's cost is measured, not the backend's speed: a round that a loaded machine
    # stretches past the recorded layout's timeout_s must not read as a backend down
    head = "\n".join(f'url = "{url}"' if line.startswith("url =") else
                     f"timeout_s = {ROUND_TIMEOUT_S}" if line.startswith("timeout_s =") else line
                     for line in head.splitlines())
    blocks = replay.layout_text.split("[[nodes]]")[1:]
    by_role = {n.role: block for n in recorded.nodes for block in blocks if f'role = "{n.role}"' in block}
    out = [head]
    for template, name in synthetic_names(replay.templates, nodes):
        role = next(n.role for n in recorded.nodes if n.name == template)
        body = "\n".join(line for line in by_role[role].strip().splitlines() if not line.startswith("hosts ="))
        out.append(f'[[nodes]]\nname = "{name}"\n{body}\n')
    return "\n".join(out)


async def _run(layout_path: Path, ticks: int) -> dict[str, float | list[float] | int]:
    from infertop.layouts.loader import load_layout
    from infertop.monitor.channel.protocol import encode_snapshot
    from infertop.monitor.monitor import Monitor

    layout = load_layout(layout_path)
    monitor = Monitor(layout)
    tick_s: list[float] = []
    encode_s: list[float] = []
    cpu_at: list[float] = []
    statuses: list[dict[str, int]] = []
    details: list[str] = []
    done = asyncio.Event()
    real_tick = monitor.tick

    def timed_tick(now: float | None = None):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        snap = real_tick(now)
        t1 = time.perf_counter()
        encode_snapshot(snap)
        encode_s.append(time.perf_counter() - t1)
        tick_s.append(t1 - t0)
        cpu_at.append(time.process_time())
        counts: dict[str, int] = {}
        for n in snap.nodes:
            counts[n.status] = counts.get(n.status, 0) + 1
        statuses.append(counts)
        detail = getattr(snap, "detail", None)
        details.append(detail.note if detail is not None else "every node's detail every tick")
        if len(tick_s) >= ticks and len(rounds) >= WARMUP + 3:
            done.set()
        return snap

    monitor.tick = timed_tick  # type: ignore[method-assign]
    source = monitor.sources[0]
    rounds: list[float] = []
    series: list[int] = []
    cpu_at_round: list[float] = []

    def heard(s: object) -> None:
        if source.round_started_at is not None and source.round_finished_at is not None:
            rounds.append(source.round_finished_at - source.round_started_at)
            series.append(getattr(source, "series_read", 0))
            cpu_at_round.append(time.process_time())

    source.round_listeners.append(heard)  # type: ignore[attr-defined]
    await monitor.start()
    try:
        # a loaded 2-core machine takes seconds a tick at 1,000 nodes and more
        slack_s = len(layout.nodes) * ticks * 0.05
        timeout_s = float(os.environ.get("INFERTOP_BENCH_SCALE_TIMEOUT_S", "0")) or (
            ticks * layout.cluster.interval_s * 6 + 120 + slack_s)
        await asyncio.wait_for(done.wait(), timeout=timeout_s)
    finally:
        await monitor.stop()
    steady = cpu_at[WARMUP:]
    # a round slower than the interval spans several ticks (a tick draws the newest round
    # in): the cost of reading and judging the fleet once is the CPU a round
    steady_rounds = cpu_at_round[WARMUP:]
    return {
        "cpu_per_tick_s": (steady[-1] - steady[0]) / (len(steady) - 1),
        "cpu_per_round_s": (steady_rounds[-1] - steady_rounds[0]) / (len(steady_rounds) - 1),
        "tick_s": tick_s[WARMUP:], "encode_s": encode_s[WARMUP:], "round_s": rounds[WARMUP:],
        "rss_mib": rss_bytes() / 2**20,
        "bad": sum(c.get(s, 0) for c in statuses[WARMUP:] for s in ("stale", "unreachable", "error")),
        "statuses": statuses[-1],  # type: ignore[dict-item]
        "series": series[WARMUP:], "detail": details[-1],  # type: ignore[dict-item]
    }


def one_size(nodes: int) -> dict[str, object]:
    """Run the replay server for `nodes` and this process's monitor against it."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.prom_replay.server", str(nodes), str(port)],
                              stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "ready"
        replay = Replay(nodes)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "layout.toml"
            path.write_text(layout_for(replay, nodes, f"http://127.0.0.1:{port}"))
            # start just after a scrape boundary of the replay
            time.sleep(delay_to_boundary(replay.interval_s, time.time(), offset_s=0.1))
            load = os.getloadavg()[0]
            result = asyncio.run(_run(path, TICKS))
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/replay/misses", timeout=10) as resp:
            result["misses"] = resp.read().decode()[:300]
        result["load"] = load
        return result
    finally:
        server.terminate()
        server.wait(10)


def run() -> list[Row]:
    rows = []
    for nodes in SIZES:
        r = one_size(nodes)
        cpu = float(r["cpu_per_tick_s"])  # type: ignore[arg-type]
        cpu_round = float(r["cpu_per_round_s"])  # type: ignore[arg-type]
        tick = r["tick_s"]
        rnd = r["round_s"]
        enc = r["encode_s"]
        assert isinstance(tick, list) and isinstance(rnd, list) and isinstance(enc, list)
        target = TARGET_CPU_S.get(nodes)
        rows.append(Row(
            f"prom replay, {nodes} nodes × 8 GPUs at 2 s: client CPU a tick (s; load {r['load']:.1f})",
            f"{cpu:.3f} (a round: {cpu_round:.3f})", f"≤ {target} s" if target else "—",
            ("met" if cpu <= target else f"missed ({cpu / target:.1f}×)") if target else "info", COMMAND))
        rows.append(Row(
            f"… poll round wall / Monitor.tick / encode (ms, median / p99 of {len(tick)})",
            f"{1e3 * statistics.median(rnd):.0f} / {1e3 * percentile(rnd, 99):.0f}; "
            f"{1e3 * statistics.median(tick):.0f} / {1e3 * percentile(tick, 99):.0f}; "
            f"{1e3 * statistics.median(enc):.0f} / {1e3 * percentile(enc, 99):.0f}",
            "p99 ≤ 1 s" if nodes == 1250 else "—", "info", COMMAND))
        rows.append(Row(
            "… RSS (MiB); node-ticks stale / unreachable / in error; last statuses",
            f"{r['rss_mib']:.0f}; {r['bad']}; {r['statuses']}",
            "≤ 300 MiB; 0" if nodes == 1250 else "0", "info", COMMAND))
        series = r["series"]
        assert isinstance(series, list)
        rows.append(Row(
            "… series read a tick (median; a node) — how much detail",
            f"{statistics.median(series):,.0f} ({statistics.median(series) / nodes:.0f}); {r['detail']}"
            if series else "—", "—", "info", COMMAND))
        rows.append(Row("… queries the recording does not hold (record again when the source's queries change)",
                        str(r.get("misses", "?")), "none", "info", COMMAND))
        print(rows[-5:], file=sys.stderr, flush=True)
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.figure}: {row.value} [{row.target}] {row.verdict}")
