"""The demo's simulated cluster as `NodeSample`s made in-process, without HTTP.

The TUI, memory and tick benchmarks measure infertop's own work (fleet state,
evaluation, rendering), not the cost of scraping and parsing exporter pages (that is
`bench_scrape`). So they read the same `SimCluster` the demo serves, but turn each
node's state straight into the samples the scrape source would have produced from its
pages: 8 GPUs, 4 IB ports + eth0 + a two-member bond + lo, and the engine counters.
Troubles (ports down, idle, straggler, engine restarts) come along with the simulation.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence

from infertop.collectors.sample import EngineSample, GpuSample, NicSample, NodeSample
from infertop.collectors.sources.source import PollingSource
from infertop.demo.scenario import (
    BOND_MEMBER_GBPS,
    ETH_GBPS,
    GPU_MEM_MIB,
    GPU_MODEL,
    GPUS_PER_NODE,
    IB_GBPS,
    IB_PORTS,
    SimCluster,
    SimNode,
)
from infertop.layouts.model import Layout

MIB = 1024 * 1024
SOURCE = "sim"


def demo_layout(cluster: SimCluster, reservation_start: float, interval_s: float = 1.0,
                history: int | None = None) -> Layout:
    """The layout `infertop demo --serve-only` writes, minus the URLs (no HTTP here)."""
    nics = [{"name": p, "expected_gbps": IB_GBPS, "kind": "infiniband"} for p in IB_PORTS]
    nics += [{"name": "eth0", "expected_gbps": ETH_GBPS, "kind": "ethernet"},
             {"name": "bond0", "expected_gbps": 2 * BOND_MEMBER_GBPS, "kind": "bond"}]
    start = dt.datetime.fromtimestamp(reservation_start, dt.UTC).isoformat()
    cluster_cfg: dict[str, object] = {"name": "bench-demo", "interval_s": interval_s, "window_s": 10.0}
    if history is not None:
        cluster_cfg["history"] = history
    return Layout.model_validate({
        "cluster": cluster_cfg,
        "session": {"reservation_start": start},
        "pricing": {"gpu_hour_usd": 10.582},
        "nodes": [{"name": p.name, "role": p.role, "gpus": GPUS_PER_NODE, "nics": nics}
                  for p in cluster.plans],
    })


def node_sample(node: SimNode, now: float) -> NodeSample:
    """One reading of a simulated node, as the scrape source reads it from the demo."""
    g = node.advance(now)
    used = round((0.02 if node.plan.trouble == "idle" else 0.93) * GPU_MEM_MIB) * MIB
    gpus = []
    for i in range(GPUS_PER_NODE):
        util = node.gpu_util(g, i)
        capped = node.power_capped(i)
        gpus.append(GpuSample(
            index=i, name=GPU_MODEL, uuid=f"GPU-{node.plan.index:08x}-{i:04x}",
            util_pct=float(round(util)), mem_used_bytes=used,
            mem_total_bytes=round(GPU_MEM_MIB) * MIB, power_w=round(node.gpu_power_w(util, i), 3),
            temp_c=float(round(34 + 0.42 * util)),
            sm_clock_mhz=1410.0 if capped else 1965.0, clock_event_reasons=0x4 if capped else 0,
            xid_last=0, energy_j_total=node.energy_mj[i] / 1000.0, nvlink_errors_total=0,
        ))
    nb = node.nic_bytes
    nics = [
        NicSample(name="bond0", kind="bond", state="up", speed_gbps=2 * BOND_MEMBER_GBPS,
                  rx_bytes_total=nb["bond0"][0], tx_bytes_total=nb["bond0"][1],
                  members=["eth1", "eth2"], members_up=2),
        NicSample(name="eth0", kind="ethernet", state="up", speed_gbps=ETH_GBPS,
                  rx_bytes_total=nb["eth0"][0], tx_bytes_total=nb["eth0"][1]),
        *(NicSample(name=eth, kind="ethernet", state="up", speed_gbps=BOND_MEMBER_GBPS,
                    rx_bytes_total=nb[eth][0], tx_bytes_total=nb[eth][1]) for eth in ("eth1", "eth2")),
        NicSample(name="lo", kind="loopback", state="unknown",
                  rx_bytes_total=nb["lo"][0], tx_bytes_total=nb["lo"][1]),
        *(NicSample(name=p, kind="infiniband", state="down" if node.port_down(p) else "active",
                    speed_gbps=IB_GBPS, rx_bytes_total=nb[p][0], tx_bytes_total=nb[p][1],
                    xmit_wait_total=0.0, link_downed_total=1.0 if node.port_down(p) else 0.0)
          for p in IB_PORTS),
    ]
    e = node.engine
    engine = EngineSample(
        profile="deepinfer", steps_total=e.steps, drafts_total=e.drafts,
        draft_tokens_total=e.draft_tokens, accepted_tokens_total=e.accepted,
        generation_tokens_total=e.generation, prompt_tokens_total=e.prompt,
        prompt_cached_tokens_total=e.prefix_hits,
        requests_finished_total=e.finished_stop + e.finished_length,
        ttft_seconds_sum=e.ttft_sum, ttft_seconds_count=e.ttft_count,
        itl_seconds_sum=e.itl_sum, itl_seconds_count=e.itl_count,
        requests_running=float(g.running), requests_waiting=float(g.waiting),
        kv_cache_usage=round(g.kv_usage, 4),
    )
    return NodeSample(node=node.plan.name, source=SOURCE, taken_at=now, gpus=gpus, nics=nics,
                      engine=engine)


def cluster_samples(cluster: SimCluster, now: float) -> list[NodeSample]:
    return [node_sample(node, now) for node in cluster.nodes.values()]


class SimSource(PollingSource):
    """The simulated cluster as a polling source (one poll = every node, on the loop)."""

    kind = SOURCE

    def __init__(self, cluster: SimCluster, interval_s: float):
        super().__init__([p.name for p in cluster.plans], interval_s)
        self.cluster = cluster
        self.cpu_s = 0.0  # CPU spent simulating and making samples (process time)

    async def poll(self) -> Sequence[NodeSample]:
        start = time.process_time()
        try:
            return cluster_samples(self.cluster, time.time())
        finally:
            self.cpu_s += time.process_time() - start
