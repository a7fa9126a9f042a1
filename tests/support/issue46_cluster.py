"""The cluster of issue 46 through the real Monitor: 2 prefill and 6 decode nodes, 8 GPUs
and 8 vLLM data-parallel engines each, five scripted troubles. Every node's figures are
the pages its exporters would serve — node_exporter 1.12.1 (netdev, infiniband, and the
ethtool collector's pause / ECN names), dcgm-exporter 4.5.3 with infertop's recommended
counters (clock-event reasons, DCGM profiling SM activity), vLLM 0.33 data-parallel
engine pages (per-engine steps, cache_config_info) — read by infertop's own parsers.

The troubles (what the operator must find, each on exactly its node):
- dec-5: a RoCE pause storm — its eth0 receives 20,000 / sends 30,000 pause frames a
  second with ECN marks rising, its four IB ports wait (xmit_wait) 2,000,000 ticks a
  second against the fabric's 801 baseline, at 96 % of 400 Gb/s;
- dec-3: engine 5 steps 16 a second while its 7 peers step 40, because its GPU 5 is
  thermally throttled (SwThermal, 88 °C, 1,035 MHz);
- dec-2: GPUs 6–7 busy but waiting (util 99 %, SM active 1.5 %);
- dec-4: its engines run another KV block size (32 against the pool's 64);
- dec-1: its engine restarts (counters back to zero) a few seconds in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from infertop.collectors.pages.exporters import EXPORTER_WANTED, parts_from_exporter
from infertop.collectors.pages.exposition import parse_exposition
from infertop.collectors.pages.profiles import engine_sample_from_text
from infertop.collectors.sample import GpuSample, NicSample, NodeSample
from infertop.layouts import parse_layout
from infertop.monitor.monitor import Monitor
from infertop.monitor.snapshot import Snapshot
from tests.support.paths import REPO
from tests.support.roce_pages import ethtool_fq_name
from tests.support.upstream_pages import client_golang_page, dcgm_page, node_exporter_page
from tests.support.vllm_ranks_page import VllmRanksServer

START = dt.datetime(2026, 12, 7, 3, tzinfo=dt.UTC).timestamp()
PREFILL = ("pre-0", "pre-1")
DECODE = tuple(f"dec-{i}" for i in range(6))
NODES = PREFILL + DECODE
GPUS = 8
GPU_HOUR_USD = 10.5825  # $84.66 a node-hour
STEPS_PER_S = 40.0
SLOW_NODE, SLOW_RANK, SLOW_STEPS = "dec-3", 5, 16.0
STORM_NODE = "dec-5"
WAITING_NODE, WAITING_GPUS = "dec-2", (6, 7)
DRIFT_NODE = "dec-4"
RESTART_NODE, RESTART_AT_TICK = "dec-1", 4
IB_PORTS = tuple(f"mlx5_{i}" for i in range(4))
IB_GBPS, ETH_GBPS = 400.0, 100.0
BASE_XMIT_WAIT = 801.0  # every port of the fabric waits a little: the baseline
STORM = {"xmit_wait": 2e6, "pause_rx": 20_000.0, "pause_tx": 30_000.0, "ecn": 5_000.0, "gbps": 384.0}
QUIET = {"xmit_wait": BASE_XMIT_WAIT, "pause_rx": 0.02, "pause_tx": 0.02, "ecn": 0.0, "gbps": 40.0}
DCGM_CSV = REPO / "docs" / "dcgm-counters.csv"

LAYOUT = f"""
[cluster]
name = "issue-46"
interval_s = 1.0
window_s = 10.0

[pricing]
gpu_hour_usd = {GPU_HOUR_USD}

[thresholds]
hold_s = 5
""" + "".join(f'[[nodes]]\nname = "{n}"\nrole = "{"prefill" if n in PREFILL else "decode"}"\ngpus = {GPUS}\n\n'
              for n in NODES)


@dataclass
class SimNode:
    name: str
    slow_until: float = 0.0  # a restarted engine warming up: half speed until then
    engine: VllmRanksServer = field(default_factory=lambda: VllmRanksServer(engines=GPUS))
    counters: dict[str, float] = field(default_factory=dict)

    def advance(self, seconds: float, now: float = 0.0) -> None:
        steps = [SLOW_STEPS if self.name == SLOW_NODE and i == SLOW_RANK else STEPS_PER_S for i in range(GPUS)]
        if now < self.slow_until:
            steps = [s / 2 for s in steps]
        self.engine.advance_ranks(seconds, steps, [0.7] * GPUS, [0.025] * GPUS)
        net = STORM if self.name == STORM_NODE else QUIET
        for key, per_s in (("pause_rx", net["pause_rx"]), ("pause_tx", net["pause_tx"]), ("ecn", net["ecn"]),
                           ("xmit_wait", net["xmit_wait"]), ("ib_bytes", net["gbps"] * 1e9 / 8),
                           ("eth_bytes", 1e9 / 8)):
            self.counters[key] = self.counters.get(key, 0.0) + per_s * seconds

    def engine_page(self) -> str:
        block = "32" if self.name == DRIFT_NODE else "64"
        info = ["# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                "# TYPE vllm:cache_config_info gauge"]
        info += [f'vllm:cache_config_info{{block_size="{block}",cache_dtype="fp8_e4m3",engine="{i}",'
                 f'enable_prefix_caching="True"}} 1.0' for i in range(GPUS)]
        # the fixture renders a fresh registry per page, whose `_created` stamps are the
        # test's wall clock, not a process start: left out, a restart is the counters' fall
        page = "".join(line for line in self.engine.page().splitlines(keepends=True) if "_created" not in line)
        return page + "\n".join(info) + "\n"

    def dcgm(self) -> str:
        gpus = []
        for i in range(GPUS):
            gpu: dict[str, Any] = {
                "index": i, "uuid": f"GPU-{self.name}-{i}", "pci_bus_id": f"00000000:{i + 16:02x}:00.0",
                "model": "NVIDIA H200", "util_pct": 90, "power_w": 650.0, "temp_c": 64, "sm_clock_mhz": 1980,
                "mem_used_bytes": 120 << 30, "fb_free_mib": 20_000, "fb_reserved_mib": 615,
                "xid_last": 0, "ecc_uncorrected_total": 0, "nvlink_errors_total": 0,
                "clock_event_reasons": 0x4,  # SwPowerCap: how a busy GPU runs, no trouble
                "sm_active_pct": 70.0, "sm_occupancy_pct": 30.0, "tensor_active_pct": 50.0,
                "dram_active_pct": 40.0,
            }
            if self.name == SLOW_NODE and i == SLOW_RANK:
                gpu.update(clock_event_reasons=0x4 | 0x20, temp_c=88, sm_clock_mhz=1035, sm_active_pct=95.0)
            if self.name == WAITING_NODE and i in WAITING_GPUS:
                gpu.update(util_pct=99, sm_active_pct=1.5)
            gpus.append(gpu)
        return dcgm_page({"gpus": gpus, "driver": "570.133.20", "hostname": self.name}, DCGM_CSV)

    def node_exporter(self) -> str:
        c = self.counters
        netdev = {"eth0": {
            "receive_bytes": c["eth_bytes"], "transmit_bytes": c["eth_bytes"], "receive_errs": 0,
            "transmit_errs": 0, "receive_drop": 0, "transmit_drop": 0, "receive_packets": 0,
            "transmit_packets": 0, "operstate": "up", "speed_bytes": ETH_GBPS * 1e9 / 8,
            "address": "b8:3f:d2:00:00:01",
        }}
        infiniband = {(port, "1"): {
            "state_id": 4, "physical_state_id": 5, "rate_bytes_per_second": IB_GBPS * 1e9 / 8,
            "port_data_received_bytes_total": round(c["ib_bytes"]),
            "port_data_transmitted_bytes_total": round(c["ib_bytes"]),
            "port_transmit_wait_total": round(c["xmit_wait"]), "port_errors_received_total": 0,
            "link_error_recovery_total": 0, "local_link_integrity_errors_total": 0,
        } for port in IB_PORTS}
        stats = {"rx_prio3_pause": round(c["pause_rx"]), "tx_prio3_pause": round(c["pause_tx"]),
                 "rx_ecn_mark": round(c["ecn"])}
        ethtool = {ethtool_fq_name(stat): ("untyped", f"Network interface {stat}", [({"device": "eth0"}, value)])
                   for stat, value in stats.items()}
        return node_exporter_page({"netdev": netdev, "infiniband": infiniband}) + client_golang_page(ethtool)

    def sample(self, at: float) -> NodeSample:
        parts: dict[str, Any] = {}
        for page in (self.dcgm(), self.node_exporter()):
            parts.update(parts_from_exporter(parse_exposition(page, "exporter", wanted=EXPORTER_WANTED)))
        gpus: list[GpuSample] = parts["gpus"]
        nics: list[NicSample] = parts["nics"]
        return NodeSample(node=self.name, source="scrape", taken_at=at, gpus=gpus, nics=nics,
                          engine=engine_sample_from_text(self.engine_page(), "vllm"))


def run_cluster(ticks: int = 16, restart_slow_s: float = 0.0) -> list[Snapshot]:
    """A frame a second through the real Monitor, the troubles on from the start;
    `restart_slow_s`: how long the restarted engine steps at half speed."""
    monitor = Monitor(parse_layout(LAYOUT), sources=[], clock=lambda: START)
    nodes = {name: SimNode(name) for name in NODES}
    frames = []
    for tick in range(ticks):
        now = START + tick
        for node in nodes.values():
            if node.name == RESTART_NODE and tick == RESTART_AT_TICK:
                node.engine = VllmRanksServer(engines=GPUS, seed=7)  # a new process: counters from 0
                node.slow_until = now + restart_slow_s
            node.advance(1.0, now)
            monitor.fleet.ingest(node.sample(now))
        frames.append(monitor.tick(now + 0.01))
    return frames
