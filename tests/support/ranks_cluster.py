"""A decode node of four vLLM 0.33 engines (TP 2) through the real Monitor, with SM activity
on its GPUs (GPM-like) and, optionally, the processes holding them: shared by the monitor
and TUI tests of issue 35."""

from __future__ import annotations

from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import GpuProcess, GpuSample, NodeSample
from infertop.layouts import Layout, parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.vllm_ranks_page import VllmRanksServer

LAYOUT = """
[cluster]
name = "ranks"
interval_s = 1.0
window_s = 10.0
tensor_parallel_size = 4

[pricing]
gpu_hour_usd = 2.5

[[nodes]]
name = "decode-05"
role = "decode"
gpus = 8
engine = { url = "http://127.0.0.1:1/metrics", tensor_parallel_size = 2 }
"""
STEPS = [30.0, 30.0, 12.0, 30.0]  # engine 2 (GPUs 4–5) straggles within its node
WAITING_GPUS = (6, 7)  # engine 3's GPUs: util 100 %, SM active 1 %


def gpus(stray: bool = False) -> list[GpuSample]:
    out = []
    for g in range(8):
        procs = [GpuProcess(pid=4100 + g // 2, user="vllm", command="python3 -m vllm.entrypoints.openai.api_server",
                            gpu_mem_bytes=70 << 30)]
        if stray and g == 3:
            procs.append(GpuProcess(pid=31337, user="alice", command="python3 leftover_eval.py [red]x[/red]",
                                    gpu_mem_bytes=6 << 30))
        out.append(GpuSample(index=g, util_pct=100.0, sm_active_pct=1.0 if g in WAITING_GPUS else 85.0,
                             sm_occupancy_pct=20.0, tensor_active_pct=50.0, dram_active_pct=30.0,
                             activity_source="gpm", processes=procs))
    return out


def ranks_layout(hold_s: float | None = None) -> Layout:
    text = LAYOUT if hold_s is None else LAYOUT.replace("[[nodes]]", f"[thresholds]\nhold_s = {hold_s}\n\n[[nodes]]")
    return parse_layout(text)


def ranks_snapshots(hold_s: float | None = None, stray: bool = False, ticks: int = 11) -> list[Snapshot]:
    monitor = Monitor(ranks_layout(hold_s), sources=[], clock=lambda: 1_000.0)
    server = VllmRanksServer(engines=4)
    frames = []
    for i in range(ticks):
        server.advance_ranks(1.0, STEPS, [0.7] * 4, [0.03] * 4)
        monitor.fleet.ingest(NodeSample(node="decode-05", source="test", taken_at=990.0 + i, gpus=gpus(stray),
                                     engine=engine_sample_from_text(server.page(), "vllm")))
        frames.append(monitor.tick(990.0 + i))
    return frames
