"""The demo's SSH-read node: its readings are the probe's own shape, read by the SSH
source's parser, and its figures are the node's simulated truth (as its pages say)."""

from __future__ import annotations

import json
import time

from infertop.collectors.probe.schema import parse_reading_line, reading_sample
from infertop.demo.render import engine_page
from infertop.demo.scenario import GPU_MEM_MIB, IB_PORTS, SimCluster
from infertop.demo.server import _runs
from infertop.demo.ssh_node import (
    ENGINE_PID_BASE,
    STRAY_GPU,
    STRAY_MEM_BYTES,
    STRAY_PID,
    engine_command,
    probe_reading,
)


def test_a_reading_parses_as_the_probes_does() -> None:
    now = time.time()
    node = SimCluster(16, started_at=now - 30).nodes["decode-09"]
    assert node.plan.trouble == "stray_process"
    line = (json.dumps(probe_reading(node, now, engine_page)) + "\n").encode()
    sample = reading_sample("decode-09", "ssh", parse_reading_line(line), now)
    assert sample.error is None and sample.gpus is not None and sample.nics is not None
    assert len(sample.gpus) == 8
    for gpu in sample.gpus:
        procs = gpu.processes or []
        assert procs[0].pid == ENGINE_PID_BASE + gpu.index and procs[0].command == engine_command(gpu.index)
        # what NVML lists adds up to the GPU's used memory
        assert sum(p.gpu_mem_bytes or 0 for p in procs) == gpu.mem_used_bytes
        assert gpu.mem_total_bytes == int(GPU_MEM_MIB * 1024 * 1024)
        assert gpu.activity_source == "gpm" and gpu.sm_active_pct is not None
        assert 0 < gpu.sm_active_pct <= gpu.util_pct  # type: ignore[operator]
    stray = [p for g in sample.gpus for p in g.processes or () if p.pid == STRAY_PID]
    assert len(stray) == 1 and stray[0].gpu_mem_bytes == STRAY_MEM_BYTES
    assert [p.pid for p in sample.gpus[STRAY_GPU].processes or ()] == [ENGINE_PID_BASE + STRAY_GPU, STRAY_PID]
    nics = {n.name: n for n in sample.nics}
    assert {*IB_PORTS, "eth0", "bond0"} <= set(nics) and all(nics[p].state == "active" for p in IB_PORTS)
    assert nics["bond0"].members == ["eth1", "eth2"] and nics["bond0"].members_up == 2


def test_a_calm_node_has_no_stray() -> None:
    now = time.time()
    node = SimCluster(16, started_at=now - 30).nodes["decode-01"]
    reading = probe_reading(node, now, None)
    assert "engine_text" not in reading
    assert all(len(g["processes"]) == 1 for g in reading["gpus"])


def test_the_ssh_node_is_cut_out_of_its_pool_range() -> None:
    names = [f"decode-{i:02d}" for i in range(1, 13)]
    assert _runs(names, {"decode-09"}) == [names[:8], ["decode-09"], names[9:]]
    assert _runs(names, {"decode-01"}) == [["decode-01"], names[1:]]
    assert _runs(names, set()) == [names]
