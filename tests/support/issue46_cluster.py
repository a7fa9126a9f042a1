"""The cluster of issue 46 through the real Monitor: the demo's `diagnosis` scenario
(infertop/demo/diagnosis.py — ONE definition, which `infertop demo --scenario diagnosis`
serves over HTTP), its pages read by infertop's own parsers a tick at a time.

The troubles (what the operator must find, each on exactly its node): dec-5 a RoCE pause
storm, dec-3 a slow rank on a thermally throttled GPU, dec-2 GPUs busy but waiting,
dec-4 another KV block size, dec-1 an engine restart (see the module's docstring).
"""

from __future__ import annotations

from typing import Any

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.demo.diagnosis import (
    DECODE,
    DRIFT_NODE,
    GPU_HOUR_USD,
    GPUS,
    HOLD_S,
    NODES,
    PREFILL,
    RESTART_AT_S,
    RESTART_NODE,
    SLOW_NODE,
    SLOW_RANK,
    SLOW_STEPS,
    STORM_NODE,
    WAITING_GPUS,
    WAITING_NODE,
    DiagnosisCluster,
    DiagnosisNode,
)
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot

__all__ = ["DECODE", "DRIFT_NODE", "GPUS", "GPU_HOUR_USD", "NODES", "PREFILL", "RESTART_AT_TICK",
           "RESTART_NODE", "SLOW_NODE", "SLOW_RANK", "SLOW_STEPS", "START", "STORM_NODE", "WAITING_GPUS",
           "WAITING_NODE", "run_cluster"]

START = 1_796_612_400.0  # 2026-12-07 03:00 UTC
RESTART_AT_TICK = round(RESTART_AT_S)

LAYOUT = f"""
[cluster]
name = "issue-46"
interval_s = 1.0
window_s = 10.0

[pricing]
gpu_hour_usd = {GPU_HOUR_USD}

[thresholds]
hold_s = {HOLD_S:g}
""" + "".join(f'[[nodes]]\nname = "{n}"\nrole = "{"prefill" if n in PREFILL else "decode"}"\ngpus = {GPUS}\n\n'
              for n in NODES)


def sample(node: DiagnosisNode, at: float) -> NodeSample:
    """What infertop reads from the node's three pages at `at`."""
    parts: dict[str, Any] = {}
    for page in (node.dcgm_page(at), node.node_exporter_page(at)):
        parts.update(parts_from_exporter(parse_exposition(page, "exporter", wanted=EXPORTER_WANTED)))
    gpus: list[GpuSample] = parts["gpus"]
    nics: list[NicSample] = parts["nics"]
    return NodeSample(node=node.name, source="scrape", taken_at=at, gpus=gpus, nics=nics,
                      engine=engine_sample_from_text(node.engine_page(at), "vllm"))


def run_cluster(ticks: int = 16, restart_slow_s: float = 0.0) -> list[Snapshot]:
    """A frame a second through the real Monitor, the troubles on from the start;
    `restart_slow_s`: how long the restarted engine steps at half speed."""
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: START)
    cluster = DiagnosisCluster(START, restart_slow_s=restart_slow_s)
    frames = []
    for tick in range(ticks):
        now = START + tick
        for node in cluster.nodes.values():
            monitor.fleet.ingest(sample(node, now))
        frames.append(monitor.tick(now + 0.01))
    return frames
