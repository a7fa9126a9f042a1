"""Verdict evaluation per tick at cluster scale: conditions + hold/clear tracking.

512 nodes × 8 GPUs × 8 IB ports, a quarter of them prefill; every node thermally throttled (a
verdict on each) and one in eight with a port down, so the tracker carries real state.
Runs once per interval on the event loop, so it must stay a small slice of a 1 s tick.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.common import Row
from infertop.layouts.model import Layout, NicExpectation, NodeConfig
from infertop.monitor.evaluation.verdicts import VerdictTracker
from infertop.monitor.snapshot import EngineView, GpuView, NicView, NodeView

NODES, GPUS, PORTS, TICKS = 512, 8, 8, 20
TARGET_MS = 100.0


def _nodes() -> list[NodeView]:
    return [
        NodeView(
            name=f"node-{i:03d}",
            role="prefill" if i % 4 == 0 else "decode",
            status="ok",
            cost_per_hour_usd=84.66,
            gpus=[GpuView(index=g, util_pct=80.0, nvlink_links_up=18, clock_event_reasons=0x40)
                  for g in range(GPUS)],
            nics=[
                NicView(name=f"mlx5_{k}", kind="infiniband",
                        state="down" if i % 8 == 1 and k == 2 else "active",
                        speed_gbps=400.0, expected_gbps=400.0, rx_bytes_per_s=2e10, tx_bytes_per_s=2e10)
                for k in range(PORTS)
            ],
            engine=EngineView(decode_steps_per_s=50.0 + i % 7, requests_running=8.0),
        )
        for i in range(NODES)
    ]


def run() -> list[Row]:
    nodes = _nodes()
    layout = Layout(nodes=[
        NodeConfig(name=n.name, role=n.role,  # type: ignore[arg-type]
                   nics=[NicExpectation(name=f"mlx5_{k}", expected_gbps=400) for k in range(PORTS)])
        for n in nodes
    ])
    tracker = VerdictTracker()
    times = []
    for t in range(TICKS):
        start = time.perf_counter()
        out = tracker.apply(nodes, layout, float(t) * 1.0)
        times.append(time.perf_counter() - start)
    assert sum(len(n.verdicts) for n in out) == NODES + NODES // 8  # the state is real
    median_ms = statistics.median(times) * 1000
    return [
        Row(
            figure=f"verdicts per tick, {NODES} nodes × {GPUS} GPUs × {PORTS} ports (median of {TICKS})",
            value=f"{median_ms:.1f} ms",
            target=f"< {TARGET_MS:.0f} ms",
            verdict="met" if median_ms < TARGET_MS else f"missed by {median_ms - TARGET_MS:.0f} ms",
            command="make bench (benchmarks/bench_verdicts.py)",
        )
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
